// Command kwok is KWOK (fake nodes and pod lifecycles) for CRE's test tier, built from the
// published sigs.k8s.io/kwok module (nothing upstream is copied here). It is a module of its
// own: KWOK needs k8s.io libraries newer than the kube-apiserver build's 1.34.
package main

import (
	"os"

	"github.com/spf13/pflag"

	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

func main() {
	// Global flags (logging, --config) are parsed leniently before the command's own.
	global := pflag.NewFlagSet("global", pflag.ContinueOnError)
	global.ParseErrorsAllowlist.UnknownFlags = true
	global.Usage = func() {}
	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, global)
	ctx, err := config.InitFlags(ctx, global)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(global.FlagUsages()))
		logger.Error("kwok: config flags", "err", err)
		os.Exit(1)
	}
	root := cmd.NewCommand(ctx)
	root.PersistentFlags().AddFlagSet(global)
	if err := root.ExecuteContext(ctx); err != nil {
		logger.Error("kwok: exit", "err", err)
		os.Exit(1)
	}
}
