// Command etcd runs the upstream etcd server; it exists so that the local cluster can build etcd
// from its Go module at the version pinned in go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
