// Command remotesim serves the remote-service simulator on loopback for local
// runs: see package shared/remotesim.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sasflow/sas/shared/remotesim"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("remotesim failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	addr := flag.String("addr", "127.0.0.1:9090", "loopback address to listen on")
	seed := flag.Uint64("seed", 0, "seed of the random faults (0: random)")
	var f remotesim.Faults
	flag.Float64Var(&f.Transient, "transient", 0, "probability of a 503 without effect")
	flag.Float64Var(&f.Permanent, "permanent", 0, "probability of a 422 rejection")
	flag.Float64Var(&f.Hang, "hang", 0, "probability of hanging until the caller gives up")
	flag.Float64Var(&f.ApplyThenFail, "apply-then-fail", 0, "probability of applying the effect, then answering 503")
	flag.Float64Var(&f.Latency, "latency", 0, "probability of added latency")
	latMin := flag.Duration("latency-min", 50*time.Millisecond, "least added latency")
	latMax := flag.Duration("latency-max", 500*time.Millisecond, "most added latency")
	reject := flag.String("reject-steps", "", "comma-separated steps to reject permanently")
	flag.Parse()

	if err := loopback(*addr); err != nil {
		return err
	}
	f.LatencyMin, f.LatencyMax = remotesim.Duration(*latMin), remotesim.Duration(*latMax)
	if *reject != "" {
		f.RejectSteps = strings.Split(*reject, ",")
	}
	opts := []remotesim.Option{}
	if *seed != 0 {
		opts = append(opts, remotesim.WithSeed(*seed))
	}
	sim := remotesim.New(opts...)
	if err := sim.SetFaults(f); err != nil {
		return err
	}
	defer sim.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: *addr, Handler: sim, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("remotesim listening", "addr", *addr, "faults", f)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sim.Close() // hanging calls would hold Shutdown up
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// loopback refuses to expose the simulator beyond this machine.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-addr %q: the simulator serves on loopback only", addr)
	}
	return nil
}
