package console

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var embedded embed.FS

// staticFS serves /static/...: the style sheet and the one script.
var staticFS fs.FS = embedded

// pageNames are the page templates, each a file defining "content".
var pageNames = []string{"overview", "list", "order", "confirm", "failure", "dlq"}

// pages are the parsed page templates: each executes "layout" for the
// whole page and "content" for the live part alone.
type pages struct {
	set map[string]*template.Template
}

var funcs = template.FuncMap{
	"lower": func(v any) string { return strings.ToLower(fmt.Sprint(v)) },
	"clip":  clip,
	"stamp": stamp,
	"stampOf": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return stamp(*t)
	},
	"inc": func(i int) int { return i + 1 },
	// f1 writes an SVG coordinate.
	"f1": func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"seconds": func(ms int64) string {
		return (time.Duration(ms) * time.Millisecond).String()
	},
}

func parsePages() (*pages, error) {
	base, err := template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: parse the layout: %w", err)
	}
	p := &pages{set: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse page %s: %w", name, err)
		}
		p.set[name] = t
	}
	return p, nil
}
