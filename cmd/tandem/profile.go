package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfile writes a CPU profile of the whole serve to path until stop
// is called ("" profiles nothing). Benchmarks set TANDEM_CPUPROFILE to see
// where a spawned tandem spends its time (a profile of the client's
// process would not show the server's passes).
func cpuProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("TANDEM_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("TANDEM_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
