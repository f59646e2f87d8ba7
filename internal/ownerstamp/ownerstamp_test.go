package ownerstamp_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/sasflow/sas/internal/ownerstamp"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/workflow"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// lookupFunc is a function-type fake of the Directory port: IAM has no
// local engine.
type lookupFunc func(ctx context.Context, o ownerstamp.Owner) (ownerstamp.Principal, error)

func (f lookupFunc) Lookup(ctx context.Context, o ownerstamp.Owner) (ownerstamp.Principal, error) {
	return f(ctx, o)
}

func TestParseOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		owner string
		want  ownerstamp.Owner // zero: nothing to stamp
	}{
		{"arn:aws:iam::111122223333:user/alice", ownerstamp.Owner{ARN: "arn:aws:iam::111122223333:user/alice", Kind: ownerstamp.User, Partition: "aws", Account: "111122223333", Name: "alice"}},
		{"arn:aws:iam::111122223333:user/team/a/alice", ownerstamp.Owner{ARN: "arn:aws:iam::111122223333:user/team/a/alice", Kind: ownerstamp.User, Partition: "aws", Account: "111122223333", Name: "alice"}},
		{"arn:aws-cn:sts::111122223333:assumed-role/shop", ownerstamp.Owner{ARN: "arn:aws-cn:sts::111122223333:assumed-role/shop", Kind: ownerstamp.Role, Partition: "aws-cn", Account: "111122223333", Name: "shop"}},
		{"arn:aws:iam::111122223333:root", ownerstamp.Owner{}},
		{"arn:aws:sts::111122223333:federated-user/bob", ownerstamp.Owner{}},
		{"cognito-identity:us-east-1:4f29/us-east-1:3f29", ownerstamp.Owner{}},
		{"arn:aws:sts::111122223333:assumed-role/shop/session", ownerstamp.Owner{}}, // never an owner: the role is
		{"arn:aws:iam::111122223333:user/", ownerstamp.Owner{}},
		{"arn:aws:iam::111122223333:role/shop", ownerstamp.Owner{}},
		{"arn:aws:iam:eu-west-1:111122223333:user/alice", ownerstamp.Owner{}},
		{"arn:aws:iam::12345:user/alice", ownerstamp.Owner{}},
		{"arn:AWS:iam::111122223333:user/alice", ownerstamp.Owner{}},
		{"", ownerstamp.Owner{}},
	} {
		got, ok := ownerstamp.ParseOwner(tc.owner)
		if ok != (tc.want != ownerstamp.Owner{}) || got != tc.want {
			t.Errorf("ParseOwner(%q) = %+v, %v; want %+v", tc.owner, got, ok, tc.want)
		}
	}
}

// FuzzParseOwner: whatever owner a table holds, ParseOwner never panics,
// and an owner it reads names a user or a role, by the last segment of its
// ARN, whose principal IAM's ARN of that name is.
func FuzzParseOwner(f *testing.F) {
	for _, s := range []string{"arn:aws:iam::111122223333:user/team/alice", "arn:aws:sts::111122223333:assumed-role/shop",
		"arn:aws:iam::111122223333:root", "arn:::::", "arn:aws:iam::1:user//", "cognito-identity:a/b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, owner string) {
		o, ok := ownerstamp.ParseOwner(owner)
		if !ok {
			if o != (ownerstamp.Owner{}) {
				t.Fatalf("ParseOwner(%q) = %+v, false", owner, o)
			}
			return
		}
		if o.ARN != owner || o.Name == "" || strings.Contains(o.Name, "/") || (o.Kind != ownerstamp.User && o.Kind != ownerstamp.Role) ||
			!strings.HasSuffix(owner, "/"+o.Name) || !strings.HasPrefix(owner, "arn:"+o.Partition+":") {
			t.Fatalf("ParseOwner(%q) = %+v", owner, o)
		}
	})
}

// iamFake is a fake of IAM's API: a function for each call.
type iamFake struct {
	getUser func(name string) (*iam.GetUserOutput, error)
	getRole func(name string) (*iam.GetRoleOutput, error)
}

func (f iamFake) GetUser(_ context.Context, in *iam.GetUserInput, _ ...func(*iam.Options)) (*iam.GetUserOutput, error) {
	return f.getUser(aws.ToString(in.UserName))
}

func (f iamFake) GetRole(_ context.Context, in *iam.GetRoleInput, _ ...func(*iam.Options)) (*iam.GetRoleOutput, error) {
	return f.getRole(aws.ToString(in.RoleName))
}

// TestIAMLookup: the adapter asks GetUser for a user and GetRole for a
// role, by name, and answers the principal's ID, ARN and creation;
// NoSuchEntity is ErrNoSuchPrincipal, any other error is itself.
func TestIAMLookup(t *testing.T) {
	t.Parallel()
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	errThrottled := errors.New("Throttling")
	d := ownerstamp.IAM{Client: iamFake{
		getUser: func(name string) (*iam.GetUserOutput, error) {
			if name != "alice" {
				return nil, &iamtypes.NoSuchEntityException{Message: aws.String("The user with name " + name + " cannot be found.")}
			}
			return &iam.GetUserOutput{User: &iamtypes.User{UserName: aws.String(name), UserId: aws.String("AIDAZ3EXAMPLEALICE01"),
				Arn: aws.String("arn:aws:iam::111122223333:user/team/alice"), CreateDate: &created, Path: aws.String("/team/")}}, nil
		},
		getRole: func(name string) (*iam.GetRoleOutput, error) {
			if name != "shop" {
				return nil, errThrottled
			}
			return &iam.GetRoleOutput{Role: &iamtypes.Role{RoleName: aws.String(name), RoleId: aws.String("AROAZ3EXAMPLESHOP001"),
				Arn: aws.String("arn:aws:iam::111122223333:role/shop"), CreateDate: &created}}, nil
		},
	}}
	owner := func(s string) ownerstamp.Owner {
		o, ok := ownerstamp.ParseOwner(s)
		if !ok {
			t.Fatalf("ParseOwner(%q)", s)
		}
		return o
	}
	ctx := context.Background()
	if p, err := d.Lookup(ctx, owner("arn:aws:iam::111122223333:user/team/alice")); err != nil ||
		p != (ownerstamp.Principal{ID: "AIDAZ3EXAMPLEALICE01", ARN: "arn:aws:iam::111122223333:user/team/alice", Created: created}) {
		t.Fatalf("the user: %+v, %v", p, err)
	}
	if p, err := d.Lookup(ctx, owner("arn:aws:sts::111122223333:assumed-role/shop")); err != nil ||
		p != (ownerstamp.Principal{ID: "AROAZ3EXAMPLESHOP001", ARN: "arn:aws:iam::111122223333:role/shop", Created: created}) {
		t.Fatalf("the role: %+v, %v", p, err)
	}
	if _, err := d.Lookup(ctx, owner("arn:aws:iam::111122223333:user/bob")); !errors.Is(err, ownerstamp.ErrNoSuchPrincipal) {
		t.Fatalf("a user IAM does not have: %v", err)
	}
	if _, err := d.Lookup(ctx, owner("arn:aws:sts::111122223333:assumed-role/other")); !errors.Is(err, errThrottled) || errors.Is(err, ownerstamp.ErrNoSuchPrincipal) {
		t.Fatalf("IAM failing: %v", err)
	}
	if _, err := d.Lookup(ctx, ownerstamp.Owner{ARN: "x", Kind: ownerstamp.User}); err == nil {
		t.Fatal("a lookup without a name, which GetUser answers with the caller, was made")
	}
}

// The owners of TestRunStampsWhatItsPrincipalMade, and when their
// principals were created.
const (
	alice     = "arn:aws:iam::111122223333:user/team/alice"
	aliceID   = "AIDAZ3EXAMPLEALICE01"
	shop      = "arn:aws:sts::111122223333:assumed-role/shop"
	shopID    = "AROAZ3EXAMPLESHOP002"
	gone      = "arn:aws:iam::111122223333:user/gone"
	elsewhere = "arn:aws:iam::999988887777:user/alice"
	root      = "arn:aws:iam::111122223333:root"
)

var (
	t0          = time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	aliceMade   = t0.Add(-24 * time.Hour)
	shopRemade  = t0.Add(time.Hour) // deleted and created anew an hour after t0
	theDirector = lookupFunc(func(_ context.Context, o ownerstamp.Owner) (ownerstamp.Principal, error) {
		switch o.Name {
		case "alice":
			// IAM answers for the credentials' account, whatever the owner's.
			return ownerstamp.Principal{ID: aliceID, ARN: "arn:aws:iam::111122223333:user/team/alice", Created: aliceMade}, nil
		case "shop":
			return ownerstamp.Principal{ID: shopID, ARN: "arn:aws:iam::111122223333:role/service/shop", Created: shopRemade}, nil
		}
		return ownerstamp.Principal{}, ownerstamp.ErrNoSuchPrincipal
	})
)

// legacy writes an order of owner as a release before unique IDs wrote it.
func legacy(t *testing.T, s *statestore.Store, id, owner, key string, at time.Time) {
	t.Helper()
	o := workflow.Order{OrderID: id, Owner: owner, CustomerID: "c-1", Currency: "EUR", Items: []workflow.Item{{SKU: "A", Quantity: 1, UnitPriceCents: 100}},
		TotalCents: 100, RequestHash: "h-" + id, IdempotencyKey: key, CreatedAt: at, ExpiresAt: at.Add(90 * 24 * time.Hour)}
	if key != "" {
		o.KeyExpiresAt = o.ExpiresAt
	}
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), at, at.Add(time.Minute))
	st.Owner = owner
	if err := s.CreateOrder(context.Background(), o, st); err != nil {
		t.Fatal(err)
	}
}

// TestRunStampsWhatItsPrincipalMade runs the stamp on DynamoDB Local, IAM
// answering through a fake: alice's orders, made after she was created,
// are stamped with her ID (her listing, her key, her record); the orders of
// shop made before the role was deleted and created anew were its
// predecessor's, and are left; so are those of a user IAM has no longer,
// and of a user of another account, which IAM answers for with its own
// account's user of that name; the root user's needs no stamp. A dry run
// before writes nothing; a run after finds nothing of alice's.
func TestRunStampsWhatItsPrincipalMade(t *testing.T) {
	t.Parallel()
	db := enginetest.DynamoDB(t)
	tables := statestore.Tables{Orders: enginetest.UniqueName(t, "orders"), State: enginetest.UniqueName(t, "state")}
	if err := statestore.CreateTables(context.Background(), db, tables, statestore.WithoutTTL()); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0.Add(2 * time.Hour))
	s := statestore.New(db, tables, statestore.WithClock(clk))
	legacy(t, s, "a-1", alice, "k-a", t0)
	legacy(t, s, "a-2", alice, "", t0.Add(time.Minute))
	legacy(t, s, "shop-old", shop, "k-s", t0)                  // the role before it was created anew
	legacy(t, s, "shop-new", shop, "", t0.Add(90*time.Minute)) // the role as it is
	legacy(t, s, "g-1", gone, "", t0)
	legacy(t, s, "e-1", elsewhere, "", t0)
	legacy(t, s, "r-1", root, "", t0)
	stamper := statestore.NewStamper(db, tables, clk)
	ctx := context.Background()

	want := []ownerstamp.OwnerReport{ // by owner
		{Owner: gone, Orders: 1, Left: "IAM has no user gone: its orders stay unstamped, no client's"},
		{Owner: alice, ID: aliceID, Created: aliceMade, Orders: 2, Stamped: 2, KeysCopied: 1},
		{Owner: elsewhere, Orders: 1, Left: "IAM answered for arn:aws:iam::111122223333:user/team/alice, not this owner: the credentials are another account's?"},
		{Owner: shop, ID: shopID, Created: shopRemade, Orders: 2, Stamped: 1, Predecessors: 1},
	}
	dry, err := ownerstamp.Run(ctx, stamper, theDirector, true)
	wantDry := slices.Clone(want)
	wantDry[1].KeysCopied = 0
	if err != nil || !dry.DryRun || dry.Unique != 1 || !slices.Equal(dry.Owners, wantDry) {
		t.Fatalf("dry run = %+v, %v\nwant %+v", dry, err, wantDry)
	}
	if p, _ := s.ListByOwner(ctx, aliceID, 10, ""); len(p.States) != 0 {
		t.Fatalf("the dry run stamped %+v", p.States)
	}

	r, err := ownerstamp.Run(ctx, stamper, theDirector, false)
	if err != nil || r.DryRun || r.Unique != 1 || !slices.Equal(r.Owners, want) || r.Stamped() != 3 {
		t.Fatalf("run = %+v, %v\nwant %+v", r, err, want)
	}
	ids := func(key string) []string {
		p, err := s.ListByOwner(ctx, key, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range p.States {
			out = append(out, st.OrderID)
		}
		return out
	}
	if got := ids(aliceID); !slices.Equal(got, []string{"a-2", "a-1"}) {
		t.Fatalf("alice lists %v", got)
	}
	if k, err := s.GetKey(ctx, aliceID, "k-a"); err != nil || k.OrderID != "a-1" {
		t.Fatalf("alice's key names %+v, %v", k, err)
	}
	if got := ids(shopID); !slices.Equal(got, []string{"shop-new"}) {
		t.Fatalf("shop lists %v; its predecessor's order is not its", got)
	}
	if _, err := s.GetKey(ctx, shopID, "k-s"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("the predecessor's key under the role's ID: %v", err)
	}
	for id, key := range map[string]string{"shop-old": shop, "g-1": gone, "e-1": elsewhere, "r-1": root} {
		if st, err := s.GetState(ctx, id); err != nil || st.OwnerKey() != key {
			t.Fatalf("%s left: %+v, %v", id, st, err)
		}
	}

	again, err := ownerstamp.Run(ctx, stamper, theDirector, false)
	if err != nil || again.Stamped() != 0 || slices.ContainsFunc(again.Owners, func(o ownerstamp.OwnerReport) bool { return o.Owner == alice }) {
		t.Fatalf("a second run = %+v, %v", again, err)
	}
}

// TestRunStopsWhenIAMFails: an error of IAM other than a missing principal
// stops the run, and it says how far it got.
func TestRunStopsWhenIAMFails(t *testing.T) {
	t.Parallel()
	errDenied := errors.New("AccessDenied: iam:GetUser")
	store := scanFunc(func(each func(statestore.Unstamped) error) error {
		return each(statestore.Unstamped{OrderID: "o-1", Owner: alice, CreatedAt: t0})
	})
	_, err := ownerstamp.Run(context.Background(), store, lookupFunc(func(context.Context, ownerstamp.Owner) (ownerstamp.Principal, error) {
		return ownerstamp.Principal{}, errDenied
	}), false)
	if !errors.Is(err, errDenied) {
		t.Fatalf("Run = %v", err)
	}
}

// scanFunc is a Store that finds what its function hands over and stamps
// nothing.
type scanFunc func(each func(statestore.Unstamped) error) error

func (f scanFunc) ScanUnstamped(_ context.Context, each func(statestore.Unstamped) error) error {
	return f(each)
}

func (scanFunc) StampOwner(context.Context, statestore.Unstamped, string) (statestore.Stamp, error) {
	return statestore.Stamp{}, errors.New("nothing is stamped here")
}

// stampRecorder is a Store of one order that records the IDs it is
// stamped with.
type stampRecorder struct {
	order   statestore.Unstamped
	stamped []string
}

func (s *stampRecorder) ScanUnstamped(_ context.Context, each func(statestore.Unstamped) error) error {
	return each(s.order)
}

func (s *stampRecorder) StampOwner(_ context.Context, _ statestore.Unstamped, id string) (statestore.Stamp, error) {
	s.stamped = append(s.stamped, id)
	return statestore.Stamp{Record: true, Key: statestore.KeyNone}, nil
}

// FuzzLookupAnswer: whatever IAM answers for an owner (the ARN and the ID
// of the principal it found), Run never panics, and stamps an order only
// with an ID the Submission takes from API Gateway, of the owner's kind,
// and only when the answered ARN is the owner's principal: its partition,
// account, kind and name.
func FuzzLookupAnswer(f *testing.F) {
	f.Add(alice, "arn:aws:iam::111122223333:user/team/alice", aliceID)
	f.Add(alice, "arn:aws:iam::111122223333:user/alice", aliceID)
	f.Add(alice, "arn:aws:iam::999988887777:user/team/alice", aliceID)
	f.Add(shop, "arn:aws:iam::111122223333:role/shop", shopID)
	f.Add(shop, "arn:aws:iam::111122223333:user/shop", shopID)
	f.Add(shop, "arn:aws:iam::111122223333:role/shop", aliceID)
	f.Add(alice, "arn:aws:iam::111122223333:user/", "")
	f.Add(root, "", "")
	f.Fuzz(func(t *testing.T, owner, arn, id string) {
		store := &stampRecorder{order: statestore.Unstamped{OrderID: "o-1", Owner: owner, CreatedAt: t0}}
		r, err := ownerstamp.Run(context.Background(), store, lookupFunc(func(context.Context, ownerstamp.Owner) (ownerstamp.Principal, error) {
			return ownerstamp.Principal{ID: id, ARN: arn, Created: t0.Add(-time.Hour)}, nil
		}), false)
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		if len(store.stamped) == 0 {
			return
		}
		o, ok := ownerstamp.ParseOwner(owner)
		prefix := map[ownerstamp.Kind]string{ownerstamp.User: submission.UserPrefix, ownerstamp.Role: submission.RolePrefix}[o.Kind]
		parts := strings.SplitN(arn, ":", 6)
		if !ok || len(store.stamped) != 1 || store.stamped[0] != id || !submission.ValidUniqueID(id, prefix) || len(parts) != 6 ||
			parts[1] != o.Partition || parts[2] != "iam" || parts[4] != o.Account || !strings.HasPrefix(parts[5], string(o.Kind)+"/") ||
			!strings.HasSuffix(parts[5], "/"+o.Name) || r.Stamped() != 1 {
			t.Fatalf("owner %q stamped %v for IAM's answer %q %q (report %+v)", owner, store.stamped, arn, id, r)
		}
	})
}
