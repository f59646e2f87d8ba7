package enginetest

import "syscall"

// sysProcAttr makes the kernel kill an engine when the test binary dies
// without reaching Main's cleanup (a panic, a -timeout, a kill), so engines
// never outlive their tests.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
