package ddbmodel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The expression language, the subset of it this model reads: condition
// expressions (comparisons, IN, BETWEEN, AND, OR, NOT, parentheses,
// attribute_exists, attribute_not_exists, begins_with), update
// expressions (SET with +, -, if_not_exists and list_append; REMOVE), key
// conditions and projections, over document paths with map members and
// list indexes (#Steps[3].#State). See "Condition and filter expressions,
// operators, and functions in DynamoDB" and "Using update expressions in
// DynamoDB" in the DynamoDB Developer Guide
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html,
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html).
// What it does not read (ADD and DELETE clauses, contains, attribute_type, size,
// REMOVE of a list element) it refuses with a ValidationException that
// says so, rather than guess.

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // a plain name, a keyword or a function
	tName           // #name, a placeholder of ExpressionAttributeNames
	tValue          // :value, a placeholder of ExpressionAttributeValues
	tNumber         // a list index
	tPunct          // ( ) [ ] , . = <> < <= > >= + -
)

type token struct {
	kind tokKind
	text string
}

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || c == ':':
			j := i + 1
			for j < len(s) && isWord(s[j]) {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("syntax error at %q", s[i:])
			}
			k := tName
			if c == ':' {
				k = tValue
			}
			out = append(out, token{k, s[i:j]})
			i = j
		case isDigit(c):
			j := i
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			out = append(out, token{tNumber, s[i:j]})
			i = j
		case isWord(c):
			j := i
			for j < len(s) && isWord(s[j]) {
				j++
			}
			out = append(out, token{tIdent, s[i:j]})
			i = j
		case c == '<' || c == '>':
			j := i + 1
			if j < len(s) && (s[j] == '=' || (c == '<' && s[j] == '>')) {
				j++
			}
			out = append(out, token{tPunct, s[i:j]})
			i = j
		case strings.IndexByte("()[],.=+-", c) >= 0:
			out = append(out, token{tPunct, s[i : i+1]})
			i++
		default:
			return nil, fmt.Errorf("syntax error: unexpected %q", c)
		}
	}
	return append(out, token{kind: tEOF}), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isWord(c byte) bool {
	return c == '_' || isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// pathElem is one element of a document path: a name (a placeholder or a
// plain name, as written) or a list index.
type pathElem struct {
	name  string
	index int
	isIdx bool
}

type docPath []pathElem

type operandKind uint8

const (
	oPath operandKind = iota
	oValue
	oIfNotExists
	oListAppend
	oPlus
	oMinus
)

// operand is a value in an expression: a path, a value placeholder, or a
// function or arithmetic of operands.
type operand struct {
	kind  operandKind
	path  docPath
	value string
	a, b  *operand
}

type condKind uint8

const (
	cAnd condKind = iota
	cOr
	cNot
	cCmp
	cBetween
	cIn
	cExists
	cNotExists
	cBeginsWith
)

type condition struct {
	kind condKind
	op   string // of cCmp
	l, r *condition
	args []*operand
	path docPath
}

type setAction struct {
	path docPath
	val  *operand
}

type update struct {
	sets    []setAction
	removes []docPath
}

// parsed is an expression as read, with the placeholders it names: the
// request's ExpressionAttributeNames and Values must define those and no
// others.
type parsed struct {
	cond   *condition
	update *update
	proj   []docPath
	names  []string
	values []string
}

type exprKind uint8

const (
	kindCondition exprKind = iota
	kindUpdate
	kindProjection
)

type parser struct {
	toks   []token
	i      int
	names  map[string]bool
	values map[string]bool
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isPunct(s string) bool { t := p.peek(); return t.kind == tPunct && t.text == s }
func (p *parser) isKeyword(s string) bool {
	t := p.peek()
	return t.kind == tIdent && strings.EqualFold(t.text, s)
}

func (p *parser) expect(s string) error {
	if !p.isPunct(s) {
		return fmt.Errorf("syntax error: want %q, found %q", s, p.peek().text)
	}
	p.next()
	return nil
}

// parse reads text as an expression of kind.
func parse(kind exprKind, text string) (*parsed, error) {
	toks, err := lex(text)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, names: map[string]bool{}, values: map[string]bool{}}
	out := &parsed{}
	switch kind {
	case kindCondition:
		out.cond, err = p.orExpr()
	case kindUpdate:
		out.update, err = p.updateExpr()
	case kindProjection:
		out.proj, err = p.projection()
	}
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tEOF {
		return nil, fmt.Errorf("syntax error: unexpected %q", p.peek().text)
	}
	for n := range p.names {
		out.names = append(out.names, n)
	}
	for v := range p.values {
		out.values = append(out.values, v)
	}
	slices.Sort(out.names)
	slices.Sort(out.values)
	return out, nil
}

func (p *parser) orExpr() (*condition, error) {
	l, err := p.andExpr()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("OR") {
		p.next()
		r, err := p.andExpr()
		if err != nil {
			return nil, err
		}
		l = &condition{kind: cOr, l: l, r: r}
	}
	return l, nil
}

func (p *parser) andExpr() (*condition, error) {
	l, err := p.notExpr()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("AND") {
		p.next()
		r, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		l = &condition{kind: cAnd, l: l, r: r}
	}
	return l, nil
}

func (p *parser) notExpr() (*condition, error) {
	if p.isKeyword("NOT") {
		p.next()
		c, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		return &condition{kind: cNot, l: c}, nil
	}
	return p.primary()
}

var comparators = map[string]bool{"=": true, "<>": true, "<": true, "<=": true, ">": true, ">=": true}

func (p *parser) primary() (*condition, error) {
	if p.isPunct("(") {
		p.next()
		c, err := p.orExpr()
		if err != nil {
			return nil, err
		}
		return c, p.expect(")")
	}
	if t := p.peek(); t.kind == tIdent && p.toks[p.i+1].kind == tPunct && p.toks[p.i+1].text == "(" {
		switch strings.ToLower(t.text) {
		case "attribute_exists", "attribute_not_exists":
			p.next()
			p.next()
			path, err := p.path()
			if err != nil {
				return nil, err
			}
			kind := cExists
			if strings.EqualFold(t.text, "attribute_not_exists") {
				kind = cNotExists
			}
			return &condition{kind: kind, path: path}, p.expect(")")
		case "begins_with":
			p.next()
			p.next()
			a, err := p.operand()
			if err != nil {
				return nil, err
			}
			if err := p.expect(","); err != nil {
				return nil, err
			}
			b, err := p.operand()
			if err != nil {
				return nil, err
			}
			return &condition{kind: cBeginsWith, args: []*operand{a, b}}, p.expect(")")
		default:
			return nil, fmt.Errorf("the function %s is not modelled", t.text)
		}
	}
	a, err := p.operand()
	if err != nil {
		return nil, err
	}
	switch t := p.peek(); {
	case t.kind == tPunct && comparators[t.text]:
		p.next()
		b, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &condition{kind: cCmp, op: t.text, args: []*operand{a, b}}, nil
	case p.isKeyword("BETWEEN"):
		p.next()
		lo, err := p.operand()
		if err != nil {
			return nil, err
		}
		if !p.isKeyword("AND") {
			return nil, fmt.Errorf("syntax error: BETWEEN without AND")
		}
		p.next()
		hi, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &condition{kind: cBetween, args: []*operand{a, lo, hi}}, nil
	case p.isKeyword("IN"):
		p.next()
		if err := p.expect("("); err != nil {
			return nil, err
		}
		args := []*operand{a}
		for {
			b, err := p.operand()
			if err != nil {
				return nil, err
			}
			args = append(args, b)
			if !p.isPunct(",") {
				break
			}
			p.next()
		}
		return &condition{kind: cIn, args: args}, p.expect(")")
	default:
		return nil, fmt.Errorf("syntax error: a condition wants a comparison, found %q", t.text)
	}
}

// operand reads a path or a value, in a condition.
func (p *parser) operand() (*operand, error) {
	if t := p.peek(); t.kind == tValue {
		p.next()
		p.values[t.text] = true
		return &operand{kind: oValue, value: t.text}, nil
	}
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	return &operand{kind: oPath, path: path}, nil
}

// path reads a document path: a name, then [index] or .name elements.
func (p *parser) path() (docPath, error) {
	first, err := p.pathName()
	if err != nil {
		return nil, err
	}
	path := docPath{first}
	for {
		switch {
		case p.isPunct("["):
			p.next()
			t := p.next()
			if t.kind != tNumber {
				return nil, fmt.Errorf("syntax error: a list index wants a number, found %q", t.text)
			}
			n, err := strconv.Atoi(t.text)
			if err != nil {
				return nil, fmt.Errorf("list index %q: %w", t.text, err)
			}
			path = append(path, pathElem{index: n, isIdx: true})
			if err := p.expect("]"); err != nil {
				return nil, err
			}
		case p.isPunct("."):
			p.next()
			e, err := p.pathName()
			if err != nil {
				return nil, err
			}
			path = append(path, e)
		default:
			return path, nil
		}
	}
}

func (p *parser) pathName() (pathElem, error) {
	t := p.next()
	switch t.kind {
	case tName:
		p.names[t.text] = true
		return pathElem{name: t.text}, nil
	case tIdent:
		return pathElem{name: t.text}, nil
	}
	return pathElem{}, fmt.Errorf("syntax error: want an attribute name, found %q", t.text)
}

// updateExpr reads SET and REMOVE clauses, each at most once.
func (p *parser) updateExpr() (*update, error) {
	u := &update{}
	seen := map[string]bool{}
	for p.peek().kind != tEOF {
		t := p.next()
		clause := strings.ToUpper(t.text)
		if t.kind != tIdent {
			return nil, fmt.Errorf("syntax error: want SET or REMOVE, found %q", t.text)
		}
		if seen[clause] {
			return nil, fmt.Errorf("the %s section can only be used once in an update expression", clause)
		}
		seen[clause] = true
		switch clause {
		case "SET":
			for {
				path, err := p.path()
				if err != nil {
					return nil, err
				}
				if err := p.expect("="); err != nil {
					return nil, err
				}
				v, err := p.setValue()
				if err != nil {
					return nil, err
				}
				u.sets = append(u.sets, setAction{path, v})
				if !p.isPunct(",") {
					break
				}
				p.next()
			}
		case "REMOVE":
			for {
				path, err := p.path()
				if err != nil {
					return nil, err
				}
				if path[len(path)-1].isIdx {
					return nil, fmt.Errorf("REMOVE of a list element is not modelled")
				}
				u.removes = append(u.removes, path)
				if !p.isPunct(",") {
					break
				}
				p.next()
			}
		case "ADD", "DELETE":
			return nil, fmt.Errorf("the %s clause is not modelled", clause)
		default:
			return nil, fmt.Errorf("syntax error: want SET or REMOVE, found %q", t.text)
		}
	}
	if len(u.sets)+len(u.removes) == 0 {
		return nil, fmt.Errorf("the update expression is empty")
	}
	return u, nil
}

// setValue reads the right-hand side of a SET action: an operand, or two
// joined by + or -.
func (p *parser) setValue() (*operand, error) {
	a, err := p.setOperand()
	if err != nil {
		return nil, err
	}
	switch {
	case p.isPunct("+"), p.isPunct("-"):
		op := p.next().text
		b, err := p.setOperand()
		if err != nil {
			return nil, err
		}
		kind := oPlus
		if op == "-" {
			kind = oMinus
		}
		return &operand{kind: kind, a: a, b: b}, nil
	}
	return a, nil
}

func (p *parser) setOperand() (*operand, error) {
	t := p.peek()
	if t.kind == tIdent && p.toks[p.i+1].text == "(" {
		switch strings.ToLower(t.text) {
		case "if_not_exists":
			p.next()
			p.next()
			path, err := p.path()
			if err != nil {
				return nil, err
			}
			if err := p.expect(","); err != nil {
				return nil, err
			}
			v, err := p.setOperand()
			if err != nil {
				return nil, err
			}
			return &operand{kind: oIfNotExists, path: path, a: v}, p.expect(")")
		case "list_append":
			p.next()
			p.next()
			a, err := p.setOperand()
			if err != nil {
				return nil, err
			}
			if err := p.expect(","); err != nil {
				return nil, err
			}
			b, err := p.setOperand()
			if err != nil {
				return nil, err
			}
			return &operand{kind: oListAppend, a: a, b: b}, p.expect(")")
		default:
			return nil, fmt.Errorf("the function %s is not modelled in an update", t.text)
		}
	}
	if t.kind == tValue {
		p.next()
		p.values[t.text] = true
		return &operand{kind: oValue, value: t.text}, nil
	}
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	return &operand{kind: oPath, path: path}, nil
}

// projection reads a ProjectionExpression: paths separated by commas.
func (p *parser) projection() ([]docPath, error) {
	var out []docPath
	for {
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		out = append(out, path)
		if !p.isPunct(",") {
			return out, nil
		}
		p.next()
	}
}
