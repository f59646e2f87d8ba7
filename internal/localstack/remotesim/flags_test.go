package remotesim_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
)

func TestFaultFlags(t *testing.T) {
	t.Parallel()
	def := remotesim.Faults{Transient: 0.1, LatencyMin: remotesim.Duration(time.Millisecond), LatencyMax: remotesim.Duration(time.Second)}
	tests := []struct {
		args    []string
		want    func(remotesim.Faults) bool
		wantErr string
	}{
		{args: nil, want: func(f remotesim.Faults) bool {
			return f.Transient == 0.1 && f.LatencyMax == def.LatencyMax && f.RejectSteps == nil && f.RejectUndo == nil
		}},
		{args: []string{"-reject-undo", "charge-payment,ship"}, want: func(f remotesim.Faults) bool {
			return strings.Join(f.RejectUndo, "+") == "charge-payment+ship" && f.RejectSteps == nil
		}},
		{args: []string{"-reject-undo", "Bad"}, wantErr: "rejectUndo"},
		{args: []string{"-transient", "0.3", "-hang", "0.1", "-latency-max", "2s", "-reject-steps", "a,b"},
			want: func(f remotesim.Faults) bool {
				return f.Transient == 0.3 && f.Hang == 0.1 && time.Duration(f.LatencyMax) == 2*time.Second && strings.Join(f.RejectSteps, "+") == "a+b"
			}},
		{args: []string{"-transient", "0.7", "-permanent", "0.5"}, wantErr: "exceeds 1"},
		{args: []string{"-latency-min", "3s", "-latency-max", "1s"}, wantErr: "latency range"},
	}
	for _, tc := range tests {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		read := remotesim.FaultFlags(fs, def)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got, err := read()
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !tc.want(got) {
			t.Errorf("%v: got %+v, %v", tc.args, got, err)
		}
	}
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{
		"127.0.0.1:0": true, "localhost:8080": true, "[::1]:9": true,
		"0.0.0.0:80": false, "10.0.0.1:1": false, ":8080": false, "example.com:80": false, "no-port": false,
	} {
		if err := remotesim.Loopback(addr); (err == nil) != ok {
			t.Errorf("Loopback(%q) = %v", addr, err)
		}
	}
}
