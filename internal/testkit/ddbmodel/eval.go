package ddbmodel

import (
	"bytes"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// item is an item as the model keeps it. A stored item is never changed:
// a write makes a new one, sharing what it did not change, so a version
// read earlier, an image in the stream and an answer handed out stay as
// they were.
type item = map[string]types.AttributeValue

// env binds an expression's placeholders. Every placeholder the request's
// expressions use is defined (checked before anything is evaluated), so a
// lookup cannot fail here.
type env struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func (e env) name(el pathElem) string {
	if el.name[0] == '#' {
		return e.names[el.name]
	}
	return el.name
}

// elem is a path element with its name resolved.
type elem struct {
	name  string
	index int
	isIdx bool
}

func (e env) resolve(p docPath) []elem {
	out := make([]elem, len(p))
	for i, el := range p {
		if el.isIdx {
			out[i] = elem{index: el.index, isIdx: true}
			continue
		}
		out[i] = elem{name: e.name(el)}
	}
	return out
}

// get reads path p of it; false when it is absent, or the path runs
// through something that is not a map or a list.
func (e env) get(it item, p docPath) (types.AttributeValue, bool) {
	v, ok := it[e.name(p[0])]
	for _, el := range p[1:] {
		if !ok {
			return nil, false
		}
		switch c := v.(type) {
		case *types.AttributeValueMemberL:
			if !el.isIdx || el.index >= len(c.Value) {
				return nil, false
			}
			v = c.Value[el.index]
		case *types.AttributeValueMemberM:
			if el.isIdx {
				return nil, false
			}
			v, ok = c.Value[e.name(el)]
		default:
			return nil, false
		}
	}
	return v, ok
}

func (e env) operand(it item, o *operand) (types.AttributeValue, bool) {
	if o.kind == oValue {
		return e.values[o.value], true
	}
	return e.get(it, o.path)
}

// holds evaluates condition c against it (nil: the item is absent). A
// comparison with an absent operand is false, as is one of values of
// different types.
func (e env) holds(it item, c *condition) bool {
	switch c.kind {
	case cAnd:
		return e.holds(it, c.l) && e.holds(it, c.r)
	case cOr:
		return e.holds(it, c.l) || e.holds(it, c.r)
	case cNot:
		return !e.holds(it, c.l)
	case cExists:
		_, ok := e.get(it, c.path)
		return ok
	case cNotExists:
		_, ok := e.get(it, c.path)
		return !ok
	case cBeginsWith:
		a, ok1 := e.operand(it, c.args[0])
		b, ok2 := e.operand(it, c.args[1])
		if !ok1 || !ok2 {
			return false
		}
		switch x := a.(type) {
		case *types.AttributeValueMemberS:
			y, ok := b.(*types.AttributeValueMemberS)
			return ok && strings.HasPrefix(x.Value, y.Value)
		case *types.AttributeValueMemberB:
			y, ok := b.(*types.AttributeValueMemberB)
			return ok && bytes.HasPrefix(x.Value, y.Value)
		}
		return false
	case cCmp:
		a, ok1 := e.operand(it, c.args[0])
		b, ok2 := e.operand(it, c.args[1])
		if !ok1 || !ok2 {
			return false
		}
		switch c.op {
		case "=":
			return equal(a, b)
		case "<>":
			return !equal(a, b)
		}
		n, ok := order(a, b)
		if !ok {
			return false
		}
		switch c.op {
		case "<":
			return n < 0
		case "<=":
			return n <= 0
		case ">":
			return n > 0
		}
		return n >= 0
	case cBetween:
		a, ok1 := e.operand(it, c.args[0])
		lo, ok2 := e.operand(it, c.args[1])
		hi, ok3 := e.operand(it, c.args[2])
		if !ok1 || !ok2 || !ok3 {
			return false
		}
		n1, okLo := order(lo, a)
		n2, okHi := order(a, hi)
		return okLo && okHi && n1 <= 0 && n2 <= 0
	case cIn:
		a, ok := e.operand(it, c.args[0])
		if !ok {
			return false
		}
		for _, o := range c.args[1:] {
			if b, ok := e.operand(it, o); ok && equal(a, b) {
				return true
			}
		}
	}
	return false
}

// order compares two scalars of one ordered type (string, number,
// binary); false when they cannot be ordered.
func order(a, b types.AttributeValue) (int, bool) {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		if y, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(x.Value, y.Value), true
		}
	case *types.AttributeValueMemberN:
		if y, ok := b.(*types.AttributeValueMemberN); ok {
			return compareNumbers(x.Value, y.Value), true
		}
	case *types.AttributeValueMemberB:
		if y, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(x.Value, y.Value), true
		}
	}
	return 0, false
}

// equal reports whether two values are the same value of the same type:
// numbers by their value, sets whatever their order.
func equal(a, b types.AttributeValue) bool {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		return ok && compareNumbers(x.Value, y.Value) == 0
	case *types.AttributeValueMemberB:
		y, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(x.Value, y.Value)
	case *types.AttributeValueMemberBOOL:
		y, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberL:
		y, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(x.Value, y.Value, equal)
	case *types.AttributeValueMemberM:
		y, ok := b.(*types.AttributeValueMemberM)
		return ok && sameItem(x.Value, y.Value)
	case *types.AttributeValueMemberSS:
		y, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(x.Value, y.Value, strings.Compare)
	case *types.AttributeValueMemberNS:
		y, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(x.Value, y.Value, compareNumbers)
	case *types.AttributeValueMemberBS:
		y, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(x.Value, y.Value, bytes.Compare)
	}
	return false
}

func sameSet[T any](a, b []T, cmp func(T, T) int) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.SortedFunc(slices.Values(a), cmp), slices.SortedFunc(slices.Values(b), cmp)
	return slices.EqualFunc(a, b, func(x, y T) bool { return cmp(x, y) == 0 })
}

// sameItem reports whether two items hold the same attributes.
func sameItem(a, b item) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !equal(v, w) {
			return false
		}
	}
	return true
}

// compareNumbers compares two numbers as DynamoDB does, by their value:
// int64 where both fit, exact rationals otherwise.
func compareNumbers(a, b string) int {
	if x, err := strconv.ParseInt(a, 10, 64); err == nil {
		if y, err := strconv.ParseInt(b, 10, 64); err == nil {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	x, okA := new(big.Rat).SetString(a)
	y, okB := new(big.Rat).SetString(b)
	if !okA || !okB {
		return strings.Compare(a, b)
	}
	return x.Cmp(y)
}

// addNumbers is a + b, or a - b, as a number's text.
func addNumbers(a, b string, minus bool) (string, bool) {
	if x, err := strconv.ParseInt(a, 10, 64); err == nil {
		if y, err := strconv.ParseInt(b, 10, 64); err == nil {
			if minus {
				y = -y
			}
			if s := x + y; (s > x) == (y > 0) || y == 0 {
				return strconv.FormatInt(s, 10), true
			}
		}
	}
	x, okA := new(big.Rat).SetString(a)
	y, okB := new(big.Rat).SetString(b)
	if !okA || !okB {
		return "", false
	}
	if minus {
		y.Neg(y)
	}
	x.Add(x, y)
	if x.IsInt() {
		return x.Num().String(), true
	}
	return strings.TrimRight(x.FloatString(38), "0"), true
}

// setValue evaluates the right-hand side of a SET action against the item
// as it was before the update, as DynamoDB does for every action of one
// update.
func (e env) setValue(old item, o *operand) (types.AttributeValue, error) {
	switch o.kind {
	case oValue:
		return clone(e.values[o.value]), nil
	case oPath:
		v, ok := e.get(old, o.path)
		if !ok {
			return nil, validation("The provided expression refers to an attribute that does not exist in the item")
		}
		return v, nil
	case oIfNotExists:
		if v, ok := e.get(old, o.path); ok {
			return v, nil
		}
		return e.setValue(old, o.a)
	case oPlus, oMinus:
		a, err := e.setValue(old, o.a)
		if err != nil {
			return nil, err
		}
		b, err := e.setValue(old, o.b)
		if err != nil {
			return nil, err
		}
		x, ok1 := a.(*types.AttributeValueMemberN)
		y, ok2 := b.(*types.AttributeValueMemberN)
		if !ok1 || !ok2 {
			return nil, validation("An operand in the update expression has an incorrect data type")
		}
		s, ok := addNumbers(x.Value, y.Value, o.kind == oMinus)
		if !ok {
			return nil, validation("A value provided cannot be converted into a number")
		}
		return &types.AttributeValueMemberN{Value: s}, nil
	case oListAppend:
		a, err := e.setValue(old, o.a)
		if err != nil {
			return nil, err
		}
		b, err := e.setValue(old, o.b)
		if err != nil {
			return nil, err
		}
		x, ok1 := a.(*types.AttributeValueMemberL)
		y, ok2 := b.(*types.AttributeValueMemberL)
		if !ok1 || !ok2 {
			return nil, validation("An operand in the update expression has an incorrect data type")
		}
		return &types.AttributeValueMemberL{Value: append(slices.Clip(x.Value), y.Value...)}, nil
	}
	return nil, validation("ddbmodel: an operand it does not know")
}

// apply carries out update u on old (nil: the item is absent, and key its
// key attributes), returning the new item. old is left as it was.
func (e env) apply(old item, u *update, key item) (item, error) {
	vals := make([]types.AttributeValue, len(u.sets))
	for i, s := range u.sets {
		v, err := e.setValue(old, s.val)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	paths := make([][]elem, 0, len(u.sets)+len(u.removes))
	for _, s := range u.sets {
		paths = append(paths, e.resolve(s.path))
	}
	for _, r := range u.removes {
		paths = append(paths, e.resolve(r))
	}
	for i, p := range paths {
		if _, isKey := key[p[0].name]; isKey {
			return nil, validation("Cannot update attribute %s. This attribute is part of the key", p[0].name)
		}
		for _, q := range paths[i+1:] {
			if overlap(p, q) {
				return nil, validation("Two document paths overlap with each other; must remove or rewrite one of these paths; path one: %s, path two: %s",
					pathText(p), pathText(q))
			}
		}
	}
	out := make(item, len(old)+len(u.sets))
	maps.Copy(out, old)
	maps.Copy(out, key)
	fresh := map[types.AttributeValue]bool{}
	for i := range u.sets {
		if err := set(out, paths[i], vals[i], fresh); err != nil {
			return nil, err
		}
	}
	for _, p := range paths[len(u.sets):] {
		if err := remove(out, p, fresh); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// overlap reports whether one path is the other or inside it.
func overlap(a, b []elem) bool {
	n := min(len(a), len(b))
	return slices.Equal(a[:n], b[:n])
}

func pathText(p []elem) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, el := range p {
		if i > 0 {
			b.WriteString(", ")
		}
		if el.isIdx {
			b.WriteString(strconv.Itoa(el.index))
		} else {
			b.WriteString(el.name)
		}
	}
	b.WriteByte(']')
	return b.String()
}

var errBadPath = validation("The document path provided in the update expression is invalid for update")

// writable is container v as this update may change it: a copy, made once
// per update, since stored items are never changed.
func writable(v types.AttributeValue, fresh map[types.AttributeValue]bool) (types.AttributeValue, bool) {
	if fresh[v] {
		return v, true
	}
	var c types.AttributeValue
	switch x := v.(type) {
	case *types.AttributeValueMemberL:
		c = &types.AttributeValueMemberL{Value: slices.Clone(x.Value)}
	case *types.AttributeValueMemberM:
		c = &types.AttributeValueMemberM{Value: maps.Clone(x.Value)}
	default:
		return nil, false
	}
	fresh[c] = true
	return c, true
}

// parent walks p but its last element in root, making each container on
// the way writable, and returns the last one: every element of the path
// but its last must exist.
func parent(root item, p []elem, fresh map[types.AttributeValue]bool) (types.AttributeValue, error) {
	v, ok := root[p[0].name]
	if !ok {
		return nil, errBadPath
	}
	c, ok := writable(v, fresh)
	if !ok {
		return nil, errBadPath
	}
	root[p[0].name] = c
	for _, el := range p[1 : len(p)-1] {
		var child types.AttributeValue
		switch x := c.(type) {
		case *types.AttributeValueMemberL:
			if !el.isIdx || el.index >= len(x.Value) {
				return nil, errBadPath
			}
			child = x.Value[el.index]
		case *types.AttributeValueMemberM:
			if el.isIdx {
				return nil, errBadPath
			}
			if child, ok = x.Value[el.name]; !ok {
				return nil, errBadPath
			}
		}
		w, ok := writable(child, fresh)
		if !ok {
			return nil, errBadPath
		}
		switch x := c.(type) {
		case *types.AttributeValueMemberL:
			x.Value[el.index] = w
		case *types.AttributeValueMemberM:
			x.Value[el.name] = w
		}
		c = w
	}
	return c, nil
}

// set sets path p of root to v. A list index past the list's end appends.
func set(root item, p []elem, v types.AttributeValue, fresh map[types.AttributeValue]bool) error {
	if len(p) == 1 {
		root[p[0].name] = v
		return nil
	}
	c, err := parent(root, p, fresh)
	if err != nil {
		return err
	}
	last := p[len(p)-1]
	switch x := c.(type) {
	case *types.AttributeValueMemberL:
		if !last.isIdx {
			return errBadPath
		}
		if last.index >= len(x.Value) {
			x.Value = append(x.Value, v)
		} else {
			x.Value[last.index] = v
		}
	case *types.AttributeValueMemberM:
		if last.isIdx {
			return errBadPath
		}
		x.Value[last.name] = v
	}
	return nil
}

// remove removes path p of root; an absent last element is no change.
func remove(root item, p []elem, fresh map[types.AttributeValue]bool) error {
	if len(p) == 1 {
		delete(root, p[0].name)
		return nil
	}
	c, err := parent(root, p, fresh)
	if err != nil {
		return err
	}
	m, ok := c.(*types.AttributeValueMemberM)
	if !ok {
		return errBadPath
	}
	delete(m.Value, p[len(p)-1].name)
	return nil
}

// clone copies a value from a request, so that the caller's later changes
// to what it sent cannot reach the table. Scalars are immutable values.
func clone(v types.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = clone(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: cloneItem(x.Value)}
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: slices.Clone(x.Value)}
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: slices.Clone(x.Value)}
	case *types.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: slices.Clone(x.Value)}
	case *types.AttributeValueMemberBS:
		bs := make([][]byte, len(x.Value))
		for i, b := range x.Value {
			bs[i] = slices.Clone(b)
		}
		return &types.AttributeValueMemberBS{Value: bs}
	}
	return v
}

func cloneItem(it item) item {
	if it == nil {
		return nil
	}
	out := make(item, len(it))
	for k, v := range it {
		out[k] = clone(v)
	}
	return out
}

// MaxItemBytes is DynamoDB's limit on an item's size: 400 KB, names and
// values together ("Constraints in Amazon DynamoDB", Items:
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html).
const MaxItemBytes = 400 << 10

// ItemSize is an item's size as DynamoDB counts it ("DynamoDB item sizes
// and formats":
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
// each attribute's name and value; a string by its UTF-8 bytes, a number
// one byte per two significant digits and one more, a binary by its raw
// bytes, a boolean or null one byte, a list or map 3 bytes and one more
// per element.
func ItemSize(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return numberSize(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range x.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range x.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range x.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// numberSize counts a number's significant digits, leading and trailing
// zeros trimmed (an exponent's digits are not the number's), at one byte
// per two, and one byte more.
func numberSize(s string) int {
	first, last, n := -1, -1, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 'e' || c == 'E' {
			break
		}
		if c < '0' || c > '9' {
			continue
		}
		if c != '0' {
			if first < 0 {
				first = n
			}
			last = n
		}
		n++
	}
	digits := 0
	if first >= 0 {
		digits = last - first + 1
	}
	return (digits+1)/2 + 1
}
