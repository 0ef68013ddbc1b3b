// Command faultline answers "which allocation in my program caused these page
// faults?" from a perf.data recording. Run `faultline --help` for the commands.
package main

import (
	"os"

	"github.com/faultline/faultline/cmd/faultline/internal/cli"
	// Imported for its init: faultline's heap in transparent huge pages.
	_ "github.com/faultline/faultline/cmd/faultline/internal/hugeheap"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.StdEnv()))
}
