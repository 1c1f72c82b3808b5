// Command etcd is the real etcd server, built from its pinned Go module (the version that
// k8s.io/kubernetes itself requires, so one module graph serves all three components); the
// same body as upstream's server/main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
