//go:build !linux

package enginetest

import "syscall"

// sysProcAttr has no parent-death signal off Linux: there an engine outlives
// a test binary that dies before Main's cleanup.
func sysProcAttr() *syscall.SysProcAttr { return nil }
