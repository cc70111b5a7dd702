//go:build linux

package testkit

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// startProcess starts cmd so that the kernel SIGKILLs it if the test binary
// dies without running Cleanup (a panic, -timeout, ^C); otherwise orphaned
// servers would keep ports and temp dirs busy.
//
// Pdeathsig fires when the OS thread that forked exits, not the process, and
// the Go runtime retires any thread a goroutine exits while locked to. Every
// fork therefore happens on one thread that is locked and never released.
func startProcess(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	spawnerOnce.Do(func() { go spawner() })
	errc := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, errc: errc}
	return <-errc
}

type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan error
}

var (
	spawnerOnce   sync.Once
	spawnRequests = make(chan spawnRequest)
)

func spawner() {
	runtime.LockOSThread() // never unlocked, see startProcess
	for req := range spawnRequests {
		req.errc <- req.cmd.Start()
	}
}
