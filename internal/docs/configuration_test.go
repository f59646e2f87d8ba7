package docs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/topology"
)

// docs/configuration.md lists every environment variable once, with the
// actors that read it and whether the stack sets it, as shared/topology's
// descriptor says.
func TestConfigurationPageMatchesTheDescriptor(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := configurationRows(t, string(page))
	for _, name := range topology.Variables() {
		row, ok := rows[name]
		if !ok {
			t.Errorf("docs/configuration.md has no row for %s", name)
			continue
		}
		if want := topology.Readers(name); !slices.Equal(row.readers, want) {
			t.Errorf("docs/configuration.md: %s is read by %v; the descriptor says %v", name, row.readers, want)
		}
		if want := map[bool]string{true: "stack", false: "default"}[topology.Deployed(name)]; row.setBy != want {
			t.Errorf("docs/configuration.md: %s is set by %q; the descriptor says %q", name, row.setBy, want)
		}
		if row.def == "" || row.meaning == "" {
			t.Errorf("docs/configuration.md: %s has no default or no meaning", name)
		}
	}
	for name := range rows {
		if !slices.Contains(topology.Variables(), name) {
			t.Errorf("docs/configuration.md lists %s, which no actor reads (shared/topology/actors.go)", name)
		}
	}
}

type configurationRow struct {
	readers             []string
	setBy, def, meaning string
}

// configurationRows reads the page's table: | `NAME` | `actor`, ... | set by | default | meaning |.
func configurationRows(t *testing.T, page string) map[string]configurationRow {
	t.Helper()
	rows := map[string]configurationRow{}
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 5 {
			t.Fatalf("docs/configuration.md: row %q has %d cells, want 5", line, len(cells))
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if _, dup := rows[name]; dup {
			t.Errorf("docs/configuration.md lists %s twice", name)
		}
		var readers []string
		for _, r := range strings.Split(cells[1], ",") {
			readers = append(readers, strings.Trim(strings.TrimSpace(r), "`"))
		}
		rows[name] = configurationRow{readers: readers, setBy: strings.TrimSpace(cells[2]),
			def: strings.TrimSpace(cells[3]), meaning: strings.TrimSpace(cells[4])}
	}
	if len(rows) == 0 {
		t.Fatal("docs/configuration.md has no variable table")
	}
	return rows
}
