// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 so the
// testbed needs no prebuilt download. It is the same entry point as etcd's
// own main package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
