package submission

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/workflow"
)

const validBody = `{"customerId":"c-42","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2,"unitPriceCents":1999},{"sku":"PEN","quantity":1,"unitPriceCents":250}]}`

// mustDecode decodes a body the test knows is a valid order.
func mustDecode(t *testing.T, body string) OrderRequest {
	t.Helper()
	r, err := DecodeOrder([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDecodeOrderValid(t *testing.T) {
	t.Parallel()
	got, err := DecodeOrder([]byte(validBody))
	if err != nil {
		t.Fatalf("DecodeOrder: %v", err)
	}
	want := OrderRequest{
		CustomerID: "c-42",
		Currency:   "EUR",
		Items: []workflow.Item{
			{SKU: "BOOK-1", Quantity: 2, UnitPriceCents: 1999},
			{SKU: "PEN", Quantity: 1, UnitPriceCents: 250},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if total, ok := got.TotalCents(); !ok || total != 2*1999+250 {
		t.Fatalf("TotalCents = %d, %v; want %d, true", total, ok, 2*1999+250)
	}
	if string(got.Canonical()) != validBody {
		t.Fatalf("Canonical = %s, want %s", got.Canonical(), validBody)
	}
}

func TestDecodeOrderHashIgnoresLayout(t *testing.T) {
	t.Parallel()
	// Same order, other field order and whitespace: a retry from another
	// client library must hash alike.
	other := `{ "items": [ {"unitPriceCents":1999, "quantity":2, "sku":"BOOK-1"}, {"sku":"PEN","unitPriceCents":250,"quantity":1} ],
	  "currency": "EUR", "customerId": "c-42" }`
	a, b := mustDecode(t, validBody), mustDecode(t, other)
	if a.Hash() != b.Hash() {
		t.Fatalf("hashes differ: %s vs %s", a.Hash(), b.Hash())
	}
	c := mustDecode(t, strings.Replace(validBody, `"quantity":2`, `"quantity":3`, 1))
	if a.Hash() == c.Hash() {
		t.Fatal("different orders hash alike")
	}
}

// TestDecodeOrderClientID: clientId is optional and, when absent (or
// null), leaves the canonical form and hash exactly as they were before it
// existed, so Idempotency-Key replays of older requests still match.
func TestDecodeOrderClientID(t *testing.T) {
	t.Parallel()
	// The hash validBody had before clientId was added.
	const hashWithout = "4788c237034e10cb4cbde1e9255590450a185f56d933db3ca9d51e7bcf52050c"
	without := mustDecode(t, validBody)
	null := mustDecode(t, strings.Replace(validBody, `{"customerId"`, `{"clientId":null,"customerId"`, 1))
	if without.Hash() != hashWithout || null.Hash() != hashWithout || null.ClientID != "" {
		t.Fatalf("hashes %s, %s; want %s", without.Hash(), null.Hash(), hashWithout)
	}

	with := mustDecode(t, strings.Replace(validBody, `"currency"`, `"clientId":"shop.web_2-EU","currency"`, 1))
	if with.ClientID != "shop.web_2-EU" {
		t.Fatalf("ClientID %q", with.ClientID)
	}
	wantCanonical := `{"customerId":"c-42","clientId":"shop.web_2-EU","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2,"unitPriceCents":1999},{"sku":"PEN","quantity":1,"unitPriceCents":250}]}`
	if string(with.Canonical()) != wantCanonical {
		t.Fatalf("Canonical = %s, want %s", with.Canonical(), wantCanonical)
	}
	other := mustDecode(t, strings.Replace(validBody, `"currency"`, `"clientId":"shop.app","currency"`, 1))
	if with.Hash() == hashWithout || with.Hash() == other.Hash() {
		t.Fatal("the client ID does not change the hash")
	}
}

// TestDecodeOrderWorkflow: an order may name its workflow or one of its
// versions; whether it is deployed is the handler's to say. Absent, the
// hash is the one the body always had.
func TestDecodeOrderWorkflow(t *testing.T) {
	t.Parallel()
	const hashWithout = "4788c237034e10cb4cbde1e9255590450a185f56d933db3ca9d51e7bcf52050c"
	if got := mustDecode(t, validBody).Hash(); got != hashWithout {
		t.Fatalf("hash without a workflow %s, want %s", got, hashWithout)
	}
	for _, ref := range []string{"order", "order-v2", "ship-order-v12"} {
		got := mustDecode(t, strings.Replace(validBody, `"currency"`, `"workflow":"`+ref+`","currency"`, 1))
		if got.Workflow != ref || got.Hash() == hashWithout {
			t.Errorf("workflow %q: decoded %q, hash %s", ref, got.Workflow, got.Hash())
		}
	}
	for _, bad := range []string{"Order", "order v2", "", "9order", strings.Repeat("a", 41)} {
		_, err := DecodeOrder([]byte(strings.Replace(validBody, `"currency"`, `"workflow":"`+bad+`","currency"`, 1)))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Errors[0].Field != "workflow" {
			t.Errorf("workflow %q: %v, want a validation error on workflow", bad, err)
		}
	}
}

// TestDecodeOrderPriority: an order may name its class; absent or null
// it is normal and hashes as the body always did, and a class is part of
// what a retry with the same key must repeat.
func TestDecodeOrderPriority(t *testing.T) {
	t.Parallel()
	const hashWithout = "4788c237034e10cb4cbde1e9255590450a185f56d933db3ca9d51e7bcf52050c"
	null := mustDecode(t, strings.Replace(validBody, `"currency"`, `"priority":null,"currency"`, 1))
	if null.Priority != "" || null.Hash() != hashWithout {
		t.Fatalf("null priority: %q, hash %s; want none and %s", null.Priority, null.Hash(), hashWithout)
	}
	hashes := map[string]bool{hashWithout: true}
	for _, p := range []workflow.Priority{workflow.PriorityHigh, workflow.PriorityNormal, workflow.PriorityLow} {
		got := mustDecode(t, strings.Replace(validBody, `"currency"`, `"priority":"`+string(p)+`","currency"`, 1))
		if got.Priority != p || hashes[got.Hash()] {
			t.Errorf("priority %q: decoded %q, hash %s seen before", p, got.Priority, got.Hash())
		}
		hashes[got.Hash()] = true
	}
	for _, bad := range []string{"HIGH", "urgent", "", " high"} {
		_, err := DecodeOrder([]byte(strings.Replace(validBody, `"currency"`, `"priority":"`+bad+`","currency"`, 1)))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Errors[0].Field != "priority" {
			t.Errorf("priority %q: %v, want a validation error on priority", bad, err)
		}
	}
	if _, err := DecodeOrder([]byte(strings.Replace(validBody, `"currency"`, `"priority":1,"currency"`, 1))); !errors.Is(err, ErrMalformed) {
		t.Errorf("priority 1: %v, want ErrMalformed", err)
	}
}

func TestDecodeOrderErrors(t *testing.T) {
	t.Parallel()
	item := `{"sku":"S","quantity":1,"unitPriceCents":1}`
	order := func(items string) string {
		return `{"customerId":"c","currency":"EUR","items":[` + items + `]}`
	}
	tests := []struct {
		name       string
		body       string
		want       error
		wantFields []string // every field named, in order
	}{
		{"empty", "", ErrMalformed, nil},
		{"whitespace", " \n\t", ErrMalformed, nil},
		{"not UTF-8", "{\"customerId\":\"\xff\"}", ErrMalformed, nil},
		{"not JSON", "customerId=c", ErrMalformed, nil},
		{"array", "[" + item + "]", ErrMalformed, nil},
		{"null document", "null", ErrMalformed, nil},
		{"truncated", `{"customerId":"c"`, ErrMalformed, nil},
		{"missing comma", `{"customerId":"c" "currency":"EUR"}`, ErrMalformed, nil},
		{"trailing object", order(item) + "{}", ErrMalformed, nil},
		{"trailing garbage", order(item) + "x", ErrMalformed, nil},
		{"unknown field", `{"customerId":"c","note":"x"}`, ErrMalformed, []string{"note"}},
		{"unknown item field", order(`{"sku":"S","colour":"red"}`), ErrMalformed, []string{"items[0].colour"}},
		{"case variant", `{"customerID":"c"}`, ErrMalformed, []string{"customerID"}},
		{"duplicate", `{"currency":"EUR","currency":"USD"}`, ErrMalformed, []string{"currency"}},
		{"customerId number", `{"customerId":7}`, ErrMalformed, []string{"customerId"}},
		{"currency object", `{"currency":{"code":"EUR"}}`, ErrMalformed, []string{"currency"}},
		{"items object", `{"items":{}}`, ErrMalformed, []string{"items"}},
		{"item string", order(`"S"`), ErrMalformed, []string{"items[0]"}},
		{"item null", order(`null`), ErrMalformed, []string{"items[0]"}},
		{"quantity fraction", order(`{"quantity":1.5}`), ErrMalformed, []string{"items[0].quantity"}},
		{"quantity exponent", order(`{"quantity":1e2}`), ErrMalformed, []string{"items[0].quantity"}},
		{"quantity string", order(item + `,{"quantity":"2"}`), ErrMalformed, []string{"items[1].quantity"}},
		{"price bool", order(`{"unitPriceCents":true}`), ErrMalformed, []string{"items[0].unitPriceCents"}},
		{"deep nesting", `{"items":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, ErrMalformed, []string{"items[0]"}},
		{"deep nesting in value", `{"customerId":` + strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000) + `}`, ErrMalformed, []string{"customerId"}},

		{"missing all", `{}`, ErrInvalid, []string{"customerId", "currency", "items"}},
		{"nulls", `{"customerId":null,"currency":null,"items":null}`, ErrInvalid, []string{"customerId", "currency", "items"}},
		{"empty items", order(""), ErrInvalid, []string{"items"}},
		{"too many items", order(strings.TrimSuffix(strings.Repeat(item+",", MaxItems+1), ",")), ErrInvalid, []string{"items"}},
		{"bad customer", `{"customerId":"a b","currency":"EUR","items":[` + item + `]}`, ErrInvalid, []string{"customerId"}},
		{"long customer", `{"customerId":"` + strings.Repeat("a", 65) + `","currency":"EUR","items":[` + item + `]}`, ErrInvalid, []string{"customerId"}},
		{"lower currency", `{"customerId":"c","currency":"eur","items":[` + item + `]}`, ErrInvalid, []string{"currency"}},
		{"long currency", `{"customerId":"c","currency":"EURO","items":[` + item + `]}`, ErrInvalid, []string{"currency"}},
		{"item missing all", order(`{}`), ErrInvalid, []string{"items[0].sku", "items[0].quantity", "items[0].unitPriceCents"}},
		{"quantity zero", order(`{"sku":"S","quantity":0,"unitPriceCents":1}`), ErrInvalid, []string{"items[0].quantity"}},
		{"quantity too big", order(item + `,{"sku":"S","quantity":1001,"unitPriceCents":1}`), ErrInvalid, []string{"items[1].quantity"}},
		{"quantity beyond int64", order(`{"sku":"S","quantity":99999999999999999999,"unitPriceCents":1}`), ErrInvalid, []string{"items[0].quantity"}},
		{"quantity below int64", order(`{"sku":"S","quantity":-99999999999999999999,"unitPriceCents":1}`), ErrInvalid, []string{"items[0].quantity"}},
		{"price negative", order(`{"sku":"S","quantity":1,"unitPriceCents":-1}`), ErrInvalid, []string{"items[0].unitPriceCents"}},
		{"price too big", order(`{"sku":"S","quantity":1,"unitPriceCents":100000001}`), ErrInvalid, []string{"items[0].unitPriceCents"}},
		{"sku empty", order(`{"sku":"","quantity":1,"unitPriceCents":1}`), ErrInvalid, []string{"items[0].sku"}},
		{"sku unicode", order(`{"sku":"Ä","quantity":1,"unitPriceCents":1}`), ErrInvalid, []string{"items[0].sku"}},
		{"sku escaped NUL", order(`{"sku":"a\u0000","quantity":1,"unitPriceCents":1}`), ErrInvalid, []string{"items[0].sku"}},
		{"clientId number", `{"clientId":7}`, ErrMalformed, []string{"clientId"}},
		{"clientId duplicate", `{"clientId":"a","clientId":"b"}`, ErrMalformed, []string{"clientId"}},
		{"clientId case variant", `{"clientID":"a"}`, ErrMalformed, []string{"clientID"}},
		{"clientId empty", `{"customerId":"c","clientId":"","currency":"EUR","items":[` + item + `]}`, ErrInvalid, []string{"clientId"}},
		{"clientId long", `{"customerId":"c","clientId":"` + strings.Repeat("a", 65) + `","currency":"EUR","items":[` + item + `]}`, ErrInvalid, []string{"clientId"}},
		{"clientId slash", `{"customerId":"c","clientId":"shop/web","currency":"EUR","items":[` + item + `]}`, ErrInvalid, []string{"clientId"}},
		{"clientId among others", `{"clientId":"a b","items":[]}`, ErrInvalid, []string{"customerId", "clientId", "currency", "items"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeOrder([]byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeOrder error = %v, want %v", err, tt.want)
			}
			if !reflect.DeepEqual(got, OrderRequest{}) {
				t.Fatalf("DecodeOrder returned %+v with an error", got)
			}
			if fields := errorFields(err); tt.wantFields != nil && !reflect.DeepEqual(fields, tt.wantFields) {
				t.Fatalf("fields = %q, want %q", fields, tt.wantFields)
			}
		})
	}
}

// errorFields lists the fields an error of DecodeOrder names.
func errorFields(err error) []string {
	var me *MalformedError
	var ve *ValidationError
	switch {
	case errors.As(err, &me) && me.Field != "":
		return []string{me.Field}
	case errors.As(err, &ve):
		fields := make([]string, len(ve.Errors))
		for i, fe := range ve.Errors {
			fields[i] = fe.Field
		}
		return fields
	}
	return nil
}

func TestTotalCentsOverflow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		items []workflow.Item
		want  int64
		ok    bool
	}{
		{"largest valid order", repeatItem(workflow.Item{Quantity: MaxQuantity, UnitPriceCents: MaxUnitPriceCents}, MaxItems), MaxItems * MaxQuantity * MaxUnitPriceCents, true},
		{"line overflows", []workflow.Item{{Quantity: 2, UnitPriceCents: math.MaxInt64/2 + 1}}, 0, false},
		{"sum overflows", []workflow.Item{{Quantity: 1, UnitPriceCents: math.MaxInt64}, {Quantity: 1, UnitPriceCents: 1}}, 0, false},
		{"negative", []workflow.Item{{Quantity: -1, UnitPriceCents: 1}}, 0, false},
		{"zero price", []workflow.Item{{Quantity: 5, UnitPriceCents: 0}}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := OrderRequest{Items: tt.items}.TotalCents()
			if got != tt.want || ok != tt.ok {
				t.Fatalf("TotalCents = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func repeatItem(it workflow.Item, n int) []workflow.Item {
	items := make([]workflow.Item, n)
	for i := range items {
		items[i] = it
		items[i].SKU = "S"
	}
	return items
}

// TestOrderSamples runs the files the fuzzer also seeds from; the name's
// prefix says what DecodeOrder must make of each.
func TestOrderSamples(t *testing.T) {
	t.Parallel()
	files := orderSamples(t)
	if len(files) == 0 {
		t.Fatal("no samples in testdata/orders")
	}
	for name, body := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeOrder(body)
			switch {
			case strings.HasPrefix(name, "valid-"):
				if err != nil {
					t.Fatalf("DecodeOrder: %v", err)
				}
			case strings.HasPrefix(name, "malformed-"):
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error = %v, want ErrMalformed", err)
				}
			case strings.HasPrefix(name, "invalid-"):
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error = %v, want ErrInvalid", err)
				}
			default:
				t.Fatalf("sample %s has no valid-, malformed- or invalid- prefix", name)
			}
		})
	}
}

func orderSamples(tb testing.TB) map[string][]byte {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "orders", "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	files := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

func FuzzDecodeOrder(f *testing.F) {
	for _, b := range orderSamples(f) {
		f.Add(b)
	}
	for _, s := range []string{
		validBody, "", "{}", "null", "[]", `{"items":[{}]}`, `{"customerId":"\ud800"}`, `{"clientId":"a.b","clientId":null}`,
		`{"items":[{"quantity":-0}]}`, `{"items":[{"quantity":1E400}]}`, "{\"customerId\":\"c\"}\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeOrder(body)
		if err != nil {
			malformed, invalid := errors.Is(err, ErrMalformed), errors.Is(err, ErrInvalid)
			if malformed == invalid {
				t.Fatalf("error %v is neither or both of ErrMalformed and ErrInvalid", err)
			}
			var ve *ValidationError
			if errors.As(err, &ve) && len(ve.Errors) == 0 {
				t.Fatal("ValidationError without field errors")
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		// An accepted order obeys every rule...
		if got.CustomerID == "" || len(got.Currency) != 3 || len(got.Items) < 1 || len(got.Items) > MaxItems ||
			(got.ClientID != "" && !clientIDPattern.MatchString(got.ClientID)) {
			t.Fatalf("accepted %+v", got)
		}
		for _, it := range got.Items {
			if it.SKU == "" || it.Quantity < 1 || it.Quantity > MaxQuantity || it.UnitPriceCents < 0 || it.UnitPriceCents > MaxUnitPriceCents {
				t.Fatalf("accepted item %+v", it)
			}
		}
		if _, ok := got.TotalCents(); !ok {
			t.Fatalf("accepted an order whose total overflows: %+v", got)
		}
		// ...and survives a round trip through its canonical form.
		again, err := DecodeOrder(got.Canonical())
		if err != nil {
			t.Fatalf("canonical form %s rejected: %v", got.Canonical(), err)
		}
		if !reflect.DeepEqual(again, got) || again.Hash() != got.Hash() {
			t.Fatalf("round trip changed %+v into %+v", got, again)
		}
	})
}
