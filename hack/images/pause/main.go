// Command pause is the sandbox (pause) container of the local federation's real nodes: it holds
// the pod's namespaces and waits until it is told to stop. It reaps nothing and prints nothing.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
