// Command jobset is the JobSet controller manager (JobSet and pod reconcilers, the JobSet and
// pod admission webhooks) for CRE's test tier, wired over the published sigs.k8s.io/jobset
// module: nothing upstream is copied here. It is a module of its own because JobSet v0.11.1's
// webhooks use controller-runtime 0.22's builder, which Trainer's 0.23 replaced. It serves
// webhooks with certificates the caller provides (upstream's internal cert management is not
// started), has no metrics or probe listeners and no leader election.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	configapi "sigs.k8s.io/jobset/api/config/v1alpha1"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/jobset/pkg/config"
	"sigs.k8s.io/jobset/pkg/controllers"
	"sigs.k8s.io/jobset/pkg/metrics"
	"sigs.k8s.io/jobset/pkg/webhooks"
)

func main() {
	// --kubeconfig is controller-runtime's own flag (sigs.k8s.io/controller-runtime/pkg/client/config).
	host := flag.String("webhook-host", "127.0.0.1", "address the webhook server binds")
	port := flag.Int("webhook-port", 9443, "port the webhook server binds")
	certDir := flag.String("cert-dir", "", "directory holding tls.crt and tls.key for the webhook server (required)")
	gates := flag.String("feature-gates", "", "JobSet feature gates, key=value,...")
	zapOpts := zap.Options{Development: true}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("jobset")
	if err := run(*host, *port, *certDir, *gates); err != nil {
		log.Error(err, "exit")
		os.Exit(1)
	}
}

func run(host string, port int, certDir, gates string) error {
	if certDir == "" {
		return fmt.Errorf("--cert-dir is required")
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(jobset.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))

	// Upstream defaults for the Configuration, then our listeners: webhooks on host:port with
	// our certificates, nothing else.
	options, cfg, err := config.Load(scheme, "")
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
	metrics.Register()

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	restConfig.QPS = *cfg.ClientConnection.QPS
	restConfig.Burst = int(*cfg.ClientConnection.Burst)
	mgr, err := ctrl.NewManager(restConfig, options)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := controllers.SetupJobSetIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("jobset indexes: %w", err)
	}
	if err := controllers.SetupPodIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("pod indexes: %w", err)
	}
	if err := controllers.NewJobSetReconciler(mgr.GetClient(), mgr.GetScheme(),
		mgr.GetEventRecorderFor("jobset")).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("jobset controller: %w", err)
	}
	if err := controllers.NewPodReconciler(mgr.GetClient(), mgr.GetScheme(),
		mgr.GetEventRecorderFor("pod")).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("pod controller: %w", err)
	}
	jobSetWebhook, err := webhooks.NewJobSetWebhook(mgr.GetClient())
	if err != nil {
		return fmt.Errorf("jobset webhook: %w", err)
	}
	if err := jobSetWebhook.SetupWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("jobset webhook: %w", err)
	}
	if err := webhooks.NewPodWebhook(mgr.GetClient()).SetupWebhookWithManager(mgr); err != nil {
		return fmt.Errorf("pod webhook: %w", err)
	}
	return mgr.Start(ctx)
}
