// Command kube is one multi-call binary for the Kubernetes control-plane components CRE's test
// tier runs: kube-apiserver, kube-controller-manager and kube-scheduler, built from the published
// k8s.io/kubernetes module (nothing upstream is copied here). One binary links the shared
// packages once, which roughly thirds the link time and disk of three separate binaries.
//
// The component is chosen by the name the binary is invoked under (a symlink such as
// bin/kube-apiserver) or by the first argument: `kube apiserver --etcd-servers=...`.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var components = map[string]func() *cobra.Command{
	"apiserver":          apiserver.NewAPIServerCommand,
	"controller-manager": controllermanager.NewControllerManagerCommand,
	"scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "kube-")
	args := os.Args[1:]
	newCommand, ok := components[name]
	if !ok && len(args) > 0 {
		newCommand, ok = components[strings.TrimPrefix(args[0], "kube-")]
		args = args[1:]
	}
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: kube apiserver|controller-manager|scheduler [flags] (or invoke as kube-<component>)")
		os.Exit(2)
	}
	command := newCommand()
	command.SetArgs(args)
	os.Exit(cli.Run(command))
}
