package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

// maxReadmeLines keeps README.md an entrance: what the system is, how to
// run it and its tests, the data flow, the layout, and links into docs/.
const maxReadmeLines = 300

// repo is the repository as the tests read it, rooted two levels up.
var repo = os.DirFS("../..")

// pages lists the Markdown files whose links are checked: README.md,
// CONTRIBUTING.md and every page in docs/.
func pages(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	docs, err := fs.Glob(fsys, "docs/*.md")
	if err != nil {
		t.Fatalf("list docs/*.md: %v", err)
	}
	if len(docs) == 0 {
		t.Fatal("docs/ holds no Markdown page")
	}
	return append([]string{"README.md", "CONTRIBUTING.md"}, docs...)
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	// An inline link or image: [text](target) or [text](target "title").
	// The text may run over lines; nested brackets do not occur here.
	inlineLink = regexp.MustCompile(`\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	emphasis   = regexp.MustCompile(`[*_]{1,3}([^*_]+)[*_]{1,3}`)
)

// prose returns the lines of a Markdown file outside fenced code blocks,
// with their line numbers (from 1); fenced lines are blanked so numbers
// stay right.
func prose(text string) []string {
	var lines []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if fence.MatchString(line) {
			in = !in
			lines = append(lines, "")
			continue
		}
		if in {
			lines = append(lines, "")
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

// slug is GitHub's anchor for a heading's text: the rendered text (code
// spans, links and emphasis reduced to their words), lowercased, with every
// character that is not a letter, a digit, a space, '-' or '_' dropped, and
// spaces turned into '-'.
func slug(heading string) string {
	text := strings.ReplaceAll(heading, "`", "")
	text = mdLink.ReplaceAllString(text, "$1")
	text = emphasis.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns every anchor GitHub gives the headings of a Markdown
// text: a heading whose slug was taken gets "-1", "-2", ... in order.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(text) {
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		n := seen[s]
		seen[s]++
		if n > 0 {
			s = fmt.Sprintf("%s-%d", s, n)
		}
		out[s] = true
	}
	return out
}

// link is one relative link of a page and the line it starts on.
type link struct {
	line   int
	target string
}

// links returns the relative links of a Markdown text, outside code blocks
// and code spans; links with a scheme (https:, mailto:) are left out.
func links(text string) []link {
	lines := prose(text)
	for i, l := range lines {
		lines[i] = codeSpan.ReplaceAllString(l, "")
	}
	joined := strings.Join(lines, "\n")
	var out []link
	for _, m := range inlineLink.FindAllStringSubmatchIndex(joined, -1) {
		target := joined[m[2]:m[3]]
		if target == "" || scheme.MatchString(target) {
			continue
		}
		out = append(out, link{line: 1 + strings.Count(joined[:m[0]], "\n"), target: target})
	}
	return out
}

// brokenLinks checks every relative link of the page at name in fsys: the
// file it names exists, and its #fragment, if any, is an anchor of that
// file (of the page itself for a bare #fragment). It returns one message
// per broken link.
func brokenLinks(fsys fs.FS, name string) ([]string, error) {
	text, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	var broken []string
	for _, l := range links(string(text)) {
		file, frag, _ := strings.Cut(l.target, "#")
		target := name
		if file != "" {
			target = path.Clean(path.Join(path.Dir(name), file))
		}
		if !fs.ValidPath(target) {
			broken = append(broken, fmt.Sprintf("%s:%d: %s leaves the repository", name, l.line, l.target))
			continue
		}
		info, err := fs.Stat(fsys, target)
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: no file %s", name, l.line, l.target, target))
			continue
		}
		if frag == "" {
			continue
		}
		if info.IsDir() || !strings.HasSuffix(target, ".md") {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: #%s in %s, which is not a Markdown page", name, l.line, l.target, frag, target))
			continue
		}
		body, err := fs.ReadFile(fsys, target)
		if err != nil {
			return nil, fmt.Errorf("read %s, linked from %s: %w", target, name, err)
		}
		if !anchors(string(body))[frag] {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: %s has no heading with the anchor #%s", name, l.line, l.target, target, frag))
		}
	}
	return broken, nil
}

// issueReference matches what ties a page to the history of its writing
// rather than to the system: an issue or pull request by number, a link to
// one, or "the <name> issue".
var issueReference = regexp.MustCompile(`(?i)\bissues?\s*#?\d+|(?:^|[\s(\[])#\d+\b|\]\(#\d+\)|/(?:issues|pull)/\d+|\b(?:the|this|that|same)\s+(?:[\w-]+\s+)?issue\b`)

// issueReferences returns each line of text that refers to an issue.
func issueReferences(name, text string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		if m := issueReference.FindString(line); m != "" {
			out = append(out, fmt.Sprintf("%s:%d: %q", name, i+1, strings.TrimSpace(m)))
		}
	}
	return out
}

func TestSlug(t *testing.T) {
	t.Parallel()
	tests := []struct{ heading, want string }{
		{"Operating it", "operating-it"},
		{"Load: a budget covers the work, not the wait", "load-a-budget-covers-the-work-not-the-wait"},
		{"Data flow, from POST to Processed", "data-flow-from-post-to-processed"},
		{"Context (the stack's shape, in `cdk.json` or `-c key=value`)", "context-the-stacks-shape-in-cdkjson-or--c-keyvalue"},
		{"`sam local start-api`", "sam-local-start-api"},
		{"LocalStack with `cdklocal`", "localstack-with-cdklocal"},
		{"snake_case and 2 digits", "snake_case-and-2-digits"},
		{"A [linked](x.md) **bold** heading", "a-linked-bold-heading"},
		{"Größe & Ärger", "größe--ärger"},
	}
	for _, tt := range tests {
		t.Run(tt.heading, func(t *testing.T) {
			t.Parallel()
			if got := slug(tt.heading); got != tt.want {
				t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	t.Parallel()
	text := "# Title\n\n## Tear down\n\n```\n## Not a heading\n```\n\n### Tear down\n\n## Tear down\n"
	got := anchors(text)
	want := []string{"title", "tear-down", "tear-down-1", "tear-down-2"}
	for _, a := range want {
		if !got[a] {
			t.Errorf("anchors lack %q: %v", a, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("anchors = %v, want exactly %v", got, want)
	}
}

// TestBrokenLinksAreFound runs the checker on small trees, so that a
// checker that finds nothing cannot pass for a tree without broken links.
func TestBrokenLinksAreFound(t *testing.T) {
	t.Parallel()
	page := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	base := fstest.MapFS{
		"README.md":               page("# Top\n\n## Run it\n\n## Run it\n"),
		"docs/guide.md":           page("# Guide\n\n## Deploy to AWS\n"),
		"shared/api/openapi.json": page("{}"),
	}
	tests := []struct {
		name, page, text string
		want             []string // substrings, one per broken link, in order
	}{
		{"all good", "docs/a.md", "[up](../README.md#run-it) [dup](../README.md#run-it-1) [g](guide.md#deploy-to-aws) [self](#a) [api](../shared/api/openapi.json) [web](https://example.com/#x)\n# A\n", nil},
		{"missing file", "docs/a.md", "# A\n[x](gone.md)\n", []string{"docs/a.md:2: gone.md: no file docs/gone.md"}},
		{"missing anchor", "docs/a.md", "# A\n\n[x](guide.md#deploy)\n", []string{"docs/guide.md has no heading with the anchor #deploy"}},
		{"missing anchor in the page itself", "docs/a.md", "# A\n[x](#b)\n", []string{"docs/a.md has no heading with the anchor #b"}},
		{"duplicate beyond the last", "docs/a.md", "# A\n[x](../README.md#run-it-2)\n", []string{"#run-it-2"}},
		{"path from the repository root inside docs", "docs/a.md", "# A\n[x](docs/guide.md)\n", []string{"no file docs/docs/guide.md"}},
		{"leaves the repository", "docs/a.md", "# A\n[x](../../x.md)\n", []string{"leaves the repository"}},
		{"anchor in a file that is not Markdown", "docs/a.md", "# A\n[x](../shared/api/openapi.json#paths)\n", []string{"not a Markdown page"}},
		{"link over two lines", "docs/a.md", "# A\nsee [the\nguide](guide.md#nope)\n", []string{"docs/a.md:2:"}},
		{"code is not a link", "docs/a.md", "# A\n`[x](gone.md)`\n```\n[y](gone.md)\n```\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{tt.page: page(tt.text)}
			for k, v := range base {
				fsys[k] = v
			}
			got, err := brokenLinks(fsys, tt.page)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("brokenLinks = %q, want %d problems like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestEveryLinkResolves(t *testing.T) {
	t.Parallel()
	for _, name := range pages(t, repo) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			broken, err := brokenLinks(repo, name)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range broken {
				t.Error(b)
			}
		})
	}
}

// TestTheReadmeLinksIntoEveryPage keeps every page of docs/ reachable from
// the entrance.
func TestTheReadmeLinksIntoEveryPage(t *testing.T) {
	t.Parallel()
	text, err := fs.ReadFile(repo, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	var linked []string
	for _, l := range links(string(text)) {
		file, _, _ := strings.Cut(l.target, "#")
		linked = append(linked, path.Clean(file))
	}
	for _, name := range pages(t, repo) {
		if name != "README.md" && !slices.Contains(linked, name) {
			t.Errorf("README.md links to no part of %s", name)
		}
	}
}

func TestTheReadmeIsAnEntrance(t *testing.T) {
	t.Parallel()
	text, err := fs.ReadFile(repo, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, over %d: move the depth to a page of docs/ and link it", n, maxReadmeLines)
	}
}

func TestIssueReferencesAreFound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want bool
	}{
		{"issue 15 added $0.80", true},
		{"after Issue #15's merges", true},
		{"see issues 3 and 4", true},
		{"fixed in #123", true},
		{"[the fix](#42)", true},
		{"https://github.com/o/r/pull/7", true},
		{"the budget of the cost issue", true},
		{"what the operability issue asked for", true},
		{"`<State>#<shard>` and `s00`..`s63`", false},
		{"a seed of 115673927 replays it", false},
		{"[Operating it](operating.md#operating-it)", false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			if got := len(issueReferences("x.md", tt.text)) > 0; got != tt.want {
				t.Errorf("issueReferences(%q) found one: %v, want %v", tt.text, got, tt.want)
			}
		})
	}
}

func TestDocsDescribeTheSystemNotItsHistory(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(repo, "docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{"README.md"}, names...) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			text, err := fs.ReadFile(repo, name)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range issueReferences(name, string(text)) {
				t.Errorf("%s: refers to an issue; say what the system does instead", r)
			}
		})
	}
}
