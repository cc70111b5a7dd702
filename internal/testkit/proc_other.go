//go:build !linux

package testkit

import "os/exec"

// startProcess has no portable way to tie the child's life to ours outside
// Linux; Cleanup still kills it on every normal path.
func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
