// Command etcd is the etcd server CRE's test tier runs under kube-apiserver, built from the
// published go.etcd.io/etcd/server/v3 module (nothing upstream is copied here).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
