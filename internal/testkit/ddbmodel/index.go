package ddbmodel

import (
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// gsi is a global secondary index: a projection of its table, keyed by
// string attributes, that follows the table's writes eventually. "All
// reads from GSIs and streams are eventually consistent" ("DynamoDB read
// consistency",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html).
// An item is in the index only when it holds the index's keys: "the index
// is sparse" ("Take advantage of sparse indexes",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-indexes-general-sparse-indexes.html).
// A query reads each item of the partition as an eventually consistent
// read would: so an item that entered, left or moved within the lag may
// still show where it was.
type gsi struct {
	name, hash, sort string
	// proj is what the index holds besides the keys: KEYS_ONLY "Only the
	// index and primary keys are projected into the index" (Projection,
	// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Projection.html),
	// ALL every attribute, INCLUDE the keys and include.
	proj    types.ProjectionType
	include []string
	// parts holds, by partition key value, the items that are in the
	// partition or were within the lag; a query drops those no version
	// within the lag puts there any more.
	parts map[string]map[string]bool
}

// keysOf are an item's keys in g; false when it is not in g.
func (g *gsi) keysOf(it item) (part, sort string, ok bool) {
	h, ok := it[g.hash].(*types.AttributeValueMemberS)
	if !ok {
		return "", "", false
	}
	if g.sort == "" {
		return h.Value, "", true
	}
	s, ok := it[g.sort].(*types.AttributeValueMemberS)
	if !ok {
		return "", "", false
	}
	return h.Value, s.Value, true
}

// wrote notes that the item of key is now it.
func (g *gsi) wrote(key string, it item) {
	part, _, ok := g.keysOf(it)
	if !ok {
		return
	}
	members := g.parts[part]
	if members == nil {
		members = map[string]bool{}
		g.parts[part] = members
	}
	members[key] = true
}

// project is an item as g holds it.
func (g *gsi) project(t *table, it item) item {
	if g.proj == types.ProjectionTypeAll {
		return copyItem(it)
	}
	out := item{}
	for _, a := range append([]string{t.hash, g.hash, g.sort}, g.include...) {
		if v, ok := it[a]; ok && a != "" {
			out[a] = v
		}
	}
	return out
}

// row is an item a query found, with its place in the answer's order.
type row struct {
	sort, key string
	it        item
}

// gsiRows reads partition part of g as an eventually consistent query does:
// each member's version as read picks it, those whose version is in the
// partition.
func (m *Model) gsiRows(t *table, g *gsi, part string) []row {
	members := g.parts[part]
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []row
	now := m.now()
	for _, k := range keys {
		if !m.maybeIn(t, g, k, part, now) {
			delete(members, k)
			continue
		}
		it := m.read(t, k, false)
		if p, s, ok := g.keysOf(it); ok && p == part {
			out = append(out, row{sort: s, key: k, it: it})
		}
	}
	if len(members) == 0 {
		delete(g.parts, part)
	}
	return out
}

// maybeIn reports whether some version of key a read may still see puts
// it in partition part of g.
func (m *Model) maybeIn(t *table, g *gsi, key, part string, now time.Time) bool {
	e := t.items[key]
	if e == nil {
		return false
	}
	candidates(e, now, m.o.Lag)
	for _, v := range e.versions {
		if p, _, ok := g.keysOf(v.item); ok && p == part {
			return true
		}
	}
	return false
}

// compareRows orders rows by their sort key, then their table key (the
// order DynamoDB gives items of one partition and sort key is its own; the
// model's is the table key's).
func compareRows(a, b row) int {
	if c := strings.Compare(a.sort, b.sort); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}
