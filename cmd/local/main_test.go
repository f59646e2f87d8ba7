package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/catalog"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

func TestVersionsFlagRefusesWhatTheDemoCannotRun(t *testing.T) {
	// Refused before the stack starts: no engines needed.
	for _, v := range []string{"0", "3"} {
		err := run([]string{"demo", "-versions", v, "-log", filepath.Join(t.TempDir(), "local.log")}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "1 or 2") {
			t.Errorf("-versions %s: %v", v, err)
		}
	}
}

func TestDemoWithTwoVersionsNamesThemAndCountsEach(t *testing.T) {
	ddb, sqs := enginetest.Endpoints(t)
	t.Setenv(enginetest.EnvDynamoDB, ddb)
	t.Setenv(enginetest.EnvAWS, sqs)
	var out bytes.Buffer
	err := run([]string{"demo", "-orders", "8", "-clients", "2", "-versions", "2", "-plain", "-seed", "3", "-crash", "0",
		"-transient", "0", "-permanent", "0", "-hang", "0", "-apply-then-fail", "0",
		"-log", filepath.Join(t.TempDir(), "local.log")}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// The deployed catalog decides which two versions: compute them alike.
	vers, err := localstack.DemoVersions(catalog.MustDeployed(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), ", "+vers.String()+"\n") || !strings.Contains(out.String(), "verdict     OK") {
		t.Errorf("header or verdict missing:\n%s", out.String())
	}
	for _, id := range vers.IDs {
		def, err := vers.Catalog.Resolve(id)
		if err != nil {
			t.Fatal(err)
		}
		// version, steps, 4 submitted, 4 Processed (no faults).
		row := regexp.MustCompile(`\n {14}` + regexp.QuoteMeta(id) + ` +` + strconv.Itoa(len(def.Steps)) + ` +4 +4 +0 +0 +0 +\d+\n`)
		if !row.MatchString(out.String()) {
			t.Errorf("no row %s for %s:\n%s", row, id, out.String())
		}
	}
}
