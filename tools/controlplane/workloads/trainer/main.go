// Command trainer is the Kubeflow Trainer controller manager (TrainJob, TrainingRuntime,
// ClusterTrainingRuntime controllers, the runtime framework and its admission webhooks) for
// CRE's test tier, wired over the published github.com/kubeflow/trainer/v2 module: nothing
// upstream is copied here. It serves webhooks with certificates the caller provides (the
// upstream self-signed rotation is not started), has no metrics or probe listeners and no
// leader election: one instance per test control plane.
package main

import (
	"flag"
	"fmt"
	"os"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlpkg "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	configapi "github.com/kubeflow/trainer/v2/pkg/apis/config/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/config"
	"github.com/kubeflow/trainer/v2/pkg/controller"
	runtimecore "github.com/kubeflow/trainer/v2/pkg/runtime/core"
	"github.com/kubeflow/trainer/v2/pkg/webhooks"
)

func main() {
	// --kubeconfig is controller-runtime's own flag (sigs.k8s.io/controller-runtime/pkg/client/config).
	host := flag.String("webhook-host", "127.0.0.1", "address the webhook server binds")
	port := flag.Int("webhook-port", 9443, "port the webhook server binds")
	certDir := flag.String("cert-dir", "", "directory holding tls.crt and tls.key for the webhook server (required)")
	gates := flag.String("feature-gates", "", "Trainer feature gates, key=value,...")
	zapOpts := zap.Options{Development: true}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("trainer")
	if err := run(*host, *port, *certDir, *gates); err != nil {
		log.Error(err, "exit")
		os.Exit(1)
	}
}

func run(host string, port int, certDir, gates string) error {
	if certDir == "" {
		return fmt.Errorf("--cert-dir is required")
	}
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))
	utilruntime.Must(trainer.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))

	// Upstream defaults for the Configuration (runtime plugins, status server, ...), then
	// our listeners: webhooks on host:port with our certificates, nothing else.
	options, cfg, err := config.Load(scheme, "", false)
	if err != nil {
		return fmt.Errorf("default configuration: %w", err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
		return fmt.Errorf("feature gates from configuration: %w", err)
	}
	if gates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(gates); err != nil {
			return fmt.Errorf("--feature-gates: %w", err)
		}
	}
	options.Metrics = metricsserver.Options{BindAddress: "0"}
	options.HealthProbeBindAddress = "0"
	options.LeaderElection = false
	options.WebhookServer = webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir})

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(restConfig, options)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	runtimes, err := runtimecore.New(ctx, mgr.GetClient(), mgr.GetFieldIndexer(), &cfg)
	if err != nil {
		return fmt.Errorf("runtimes: %w", err)
	}
	if name, err := controller.SetupControllers(mgr, runtimes, ctrlpkg.Options{}); err != nil {
		return fmt.Errorf("controller %s: %w", name, err)
	}
	if name, err := webhooks.Setup(mgr, runtimes); err != nil {
		return fmt.Errorf("webhook %s: %w", name, err)
	}
	return mgr.Start(ctx)
}
