// Command stepgen writes what the code steps of steps/ need to run: each
// one's Lambda, functions/steps/<step>/main.go, and steps/registry.go,
// which the local stack imports (`make steps`; see internal/stepgen). It
// refuses a code step that no live workflow version has. Run it from the
// repository root.
package main

import (
	"fmt"
	"os"

	"github.com/sasflow/sas/internal/stepgen"
	"github.com/sasflow/sas/shared/catalog"
)

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "stepgen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	steps, err := stepgen.Discover(root)
	if err != nil {
		return err
	}
	c, err := catalog.Deployed()
	if err != nil {
		return fmt.Errorf("shared/catalog/workflows.json: %w", err)
	}
	if err := stepgen.Live(steps, c.AgentNames()); err != nil {
		return err
	}
	files, err := stepgen.Generate(steps)
	if err != nil {
		return err
	}
	if err := stepgen.Write(root, files); err != nil {
		return err
	}
	for _, s := range steps {
		fmt.Printf("code step %s: functions/steps/%s/main.go\n", s.Name, s.Name)
	}
	fmt.Println(stepgen.Registry)
	return nil
}
