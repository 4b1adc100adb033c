package process

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// A server's port is best chosen by the server itself (port 0, read back), but kube-apiserver,
// etcd and controller-runtime's servers all want theirs on the command line. So a port is chosen
// by binding 127.0.0.1:0 and kept bound until the child that will serve it starts: no other
// program can take it meanwhile, and the ports this program handed out are remembered so that
// one closed earlier (a server stopped, a start retried) is not handed out again.

// maxAttempts bounds the search for a port this program has not handed out yet.
const maxAttempts = 100

var (
	handedOutMu sync.Mutex
	handedOut   = map[int]bool{}
	// listen asks the kernel for a free port (a variable for the tests).
	listen = func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
)

// Port is a 127.0.0.1 port reserved for a server this program is about to start.
type Port struct {
	number int

	mu       sync.Mutex
	listener net.Listener // nil once released
}

// ReservePort reserves a free port that this program has not handed out before.
func ReservePort() (*Port, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	// Ports this program handed out before and released are free again for the kernel, which may
	// offer them once more: hold each such one until a new port is found, so it is not offered
	// again in this loop.
	var again []net.Listener
	defer func() {
		for _, l := range again {
			_ = l.Close()
		}
	}()
	for range maxAttempts {
		l, err := listen()
		if err != nil {
			return nil, fmt.Errorf("reserve a port: %w", err)
		}
		n := l.Addr().(*net.TCPAddr).Port
		if handedOut[n] {
			again = append(again, l)
			continue
		}
		handedOut[n] = true
		return &Port{number: n, listener: l}, nil
	}
	return nil, fmt.Errorf("reserve a port: no port not handed out before in %d attempts", maxAttempts)
}

// ReservePorts reserves n distinct ports; on error none stays reserved.
func ReservePorts(n int) ([]*Port, error) {
	ports := make([]*Port, 0, n)
	for range n {
		p, err := ReservePort()
		if err != nil {
			ReleaseAll(ports)
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// Number is the port number.
func (p *Port) Number() int { return p.number }

// String is the port number in decimal.
func (p *Port) String() string { return strconv.Itoa(p.number) }

// Addr is 127.0.0.1:<port>.
func (p *Port) Addr() string { return net.JoinHostPort("127.0.0.1", p.String()) }

// Release lets the port go, for the server to bind it: Start does it just before the child
// starts. Releasing twice is harmless; the port is never handed out again all the same.
func (p *Port) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != nil {
		_ = p.listener.Close()
		p.listener = nil
	}
}

// Reserved reports whether the port is still held (not yet released).
func (p *Port) Reserved() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listener != nil
}

// ReleaseAll releases every port, for a start given up before its child ran.
func ReleaseAll(ports []*Port) {
	for _, p := range ports {
		p.Release()
	}
}

// addrInUse is how Go programs (etcd, kube-apiserver, controller-runtime) and most others report
// a port another program bound first.
const addrInUse = "address already in use"

// RetryOnPortConflict calls start, which reserves its ports, starts its server and waits for it,
// up to attempts times while it fails because the server could not bind a port it was given
// (another program bound it between the release and the server's bind). Any other error, or the
// last conflict, is returned.
func RetryOnPortConflict(attempts int, start func() error) error {
	var err error
	for range max(attempts, 1) {
		if err = start(); !IsPortConflict(err) {
			return err
		}
	}
	return fmt.Errorf("%d attempts, each found a port taken: %w", max(attempts, 1), err)
}

// IsPortConflict reports whether err is a process that exited because it could not bind its port.
func IsPortConflict(err error) bool {
	var exit *ExitError
	return errors.As(err, &exit) && exit.portConflict
}
