package localstack

import (
	"io"
	"net"
	"sync"
	"time"
)

// outageProxy forwards TCP connections to an engine and can cut them: while
// it is down it resets every open connection and refuses new ones, as an
// engine that restarts or a network that drops would. The SDK's retries
// and the handlers' error paths then have to carry the system through.
type outageProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newOutageProxy(target string) (*outageProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &outageProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *outageProxy) addr() string { return p.ln.Addr().String() }

func (p *outageProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.track(c) {
			p.wg.Go(func() { p.pipe(c) })
		}
	}
}

func (p *outageProxy) pipe(c net.Conn) {
	defer p.drop(c)
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil || !p.track(up) {
		return
	}
	defer p.drop(up)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// track keeps c among the open connections an outage cuts; while the
// engine is down it closes c instead and returns false.
func (p *outageProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

// drop closes c and forgets it.
func (p *outageProxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// outage cuts the engine off for d.
func (p *outageProxy) outage(d time.Duration) {
	p.mu.Lock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	time.Sleep(d)
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *outageProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
