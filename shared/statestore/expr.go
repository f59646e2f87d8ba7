package statestore

import (
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// expr builds an update and its condition with every attribute name behind a
// placeholder (Name, State and Error are DynamoDB reserved words) and every
// value bound once.
type expr struct {
	set, remove, cond []string
	// setAt finds a path's clause in set, so setting a path twice keeps the
	// last value (DynamoDB rejects overlapping paths in one update).
	setAt  map[string]int
	setPH  map[string][]string
	n      int
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}, setAt: map[string]int{}, setPH: map[string][]string{}}
}

// path turns "Steps[1].State" into "#Steps[1].#State".
func (e *expr) path(p string) string {
	parts := strings.Split(p, ".")
	for i, part := range parts {
		name, index, _ := strings.Cut(part, "[")
		e.names["#"+name] = name
		parts[i] = "#" + name
		if index != "" {
			parts[i] += "[" + index
		}
	}
	return strings.Join(parts, ".")
}

func (e *expr) value(v types.AttributeValue) string {
	e.n++
	ph := ":v" + strconv.Itoa(e.n)
	e.values[ph] = v
	return ph
}

func (e *expr) Set(p string, v types.AttributeValue) *expr {
	pp, ph := e.path(p), e.value(v)
	e.setClause(pp, pp+" = "+ph, ph)
	return e
}

func (e *expr) setClause(path, clause string, phs ...string) {
	e.unremove(path)
	if i, ok := e.setAt[path]; ok {
		for _, old := range e.setPH[path] {
			delete(e.values, old)
		}
		e.set[i], e.setPH[path] = clause, phs
		return
	}
	e.setPH[path] = phs
	e.setAt[path] = len(e.set)
	e.set = append(e.set, clause)
}

// Add sets p to p + n, counting a missing p as 0 (records written before
// a counter existed lack it).
func (e *expr) Add(p string, n int) *expr {
	pp, ph, zero := e.path(p), e.value(num(n)), e.value(num(0))
	e.setClause(pp, pp+" = if_not_exists("+pp+", "+zero+") + "+ph, ph, zero)
	return e
}

// Remove removes p; of a Set and a Remove of one path the later one wins
// (DynamoDB rejects overlapping paths in one update).
func (e *expr) Remove(p string) *expr {
	pp := e.path(p)
	if i, ok := e.setAt[pp]; ok {
		for _, old := range e.setPH[pp] {
			delete(e.values, old)
		}
		e.set = append(e.set[:i], e.set[i+1:]...)
		delete(e.setAt, pp)
		delete(e.setPH, pp)
		for q, j := range e.setAt {
			if j > i {
				e.setAt[q] = j - 1
			}
		}
	}
	e.unremove(pp)
	e.remove = append(e.remove, pp)
	return e
}

func (e *expr) unremove(path string) {
	for i, r := range e.remove {
		if r == path {
			e.remove = append(e.remove[:i], e.remove[i+1:]...)
			return
		}
	}
}

// Is adds the condition p = v.
func (e *expr) Is(p string, v types.AttributeValue) *expr {
	e.cond = append(e.cond, e.path(p)+" = "+e.value(v))
	return e
}

// After adds the condition p > v.
func (e *expr) After(p string, v types.AttributeValue) *expr {
	e.cond = append(e.cond, e.path(p)+" > "+e.value(v))
	return e
}

// OneOf adds the condition p IN (vs...).
func (e *expr) OneOf(p string, vs ...types.AttributeValue) *expr {
	phs := make([]string, len(vs))
	for i, v := range vs {
		phs[i] = e.value(v)
	}
	e.cond = append(e.cond, e.path(p)+" IN ("+strings.Join(phs, ", ")+")")
	return e
}

// Present adds the condition attribute_exists(p).
func (e *expr) Present(p string) *expr {
	e.cond = append(e.cond, "attribute_exists("+e.path(p)+")")
	return e
}

// Absent adds the condition attribute_not_exists(p).
func (e *expr) Absent(p string) *expr {
	e.cond = append(e.cond, "attribute_not_exists("+e.path(p)+")")
	return e
}

func (e *expr) update() string {
	var b strings.Builder
	if len(e.set) > 0 {
		b.WriteString("SET " + strings.Join(e.set, ", "))
	}
	if len(e.remove) > 0 {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString("REMOVE " + strings.Join(e.remove, ", "))
	}
	return b.String()
}

func (e *expr) condition() *string {
	if len(e.cond) == 0 {
		return nil
	}
	c := strings.Join(e.cond, " AND ")
	return &c
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.Itoa(n)}
}
func millis(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}
func num64(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func boolean(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }
