// Command remotesim serves the remote-service simulator on loopback for local
// runs: see package internal/localstack/remotesim.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("remotesim failed", slog.Any("err", err))
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	addr := flag.String("addr", "127.0.0.1:9090", "loopback address to listen on")
	seed := flag.Uint64("seed", 0, "seed of the random faults (0: random)")
	faults := remotesim.FaultFlags(flag.CommandLine, remotesim.Faults{
		LatencyMin: remotesim.Duration(50 * time.Millisecond), LatencyMax: remotesim.Duration(500 * time.Millisecond),
	})
	flag.Parse()

	if err := remotesim.Loopback(*addr); err != nil {
		return err
	}
	f, err := faults()
	if err != nil {
		return err
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
	log.Info("remotesim listening", slog.String("addr", *addr), slog.Any("faults", f))

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
