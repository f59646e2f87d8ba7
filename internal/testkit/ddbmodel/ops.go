package ddbmodel

import (
	"context"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates a table: a string partition key, no sort key, its
// global secondary indexes, and its stream. An existing name is
// ResourceInUseException, as CreateTables expects.
func (m *Model) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := aws.ToString(in.TableName)
	if _, ok := m.tables[name]; ok {
		return nil, apiError("CreateTable", &types.ResourceInUseException{Message: aws.String("Table already exists: " + name)})
	}
	defs := map[string]types.ScalarAttributeType{}
	for _, d := range in.AttributeDefinitions {
		defs[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	hash, sort, err := keySchema(in.KeySchema, defs)
	if err != nil {
		return nil, apiError("CreateTable", err)
	}
	if sort != "" {
		return nil, apiError("CreateTable", validation("ddbmodel: tables with a sort key are not modelled"))
	}
	t := &table{name: name, hash: hash, items: map[string]*entry{}}
	for _, ix := range in.GlobalSecondaryIndexes {
		h, s, err := keySchema(ix.KeySchema, defs)
		if err != nil {
			return nil, apiError("CreateTable", err)
		}
		g := &gsi{name: aws.ToString(ix.IndexName), hash: h, sort: s, proj: projectionType(ix.Projection), parts: map[string]map[string]bool{}}
		if ix.Projection != nil {
			g.include = slices.Clone(ix.Projection.NonKeyAttributes)
		}
		t.gsis = append(t.gsis, g)
	}
	if s := in.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		t.stream = s.StreamViewType
	}
	m.tables[name] = t
	return &dynamodb.CreateTableOutput{TableDescription: &types.TableDescription{
		TableName: aws.String(name), TableStatus: types.TableStatusActive, KeySchema: in.KeySchema,
	}}, nil
}

func projectionType(p *types.Projection) types.ProjectionType {
	if p == nil || p.ProjectionType == "" {
		return types.ProjectionTypeAll
	}
	return p.ProjectionType
}

// keySchema reads a key schema of string attributes: its partition key and
// its sort key, if any.
func keySchema(ks []types.KeySchemaElement, defs map[string]types.ScalarAttributeType) (hash, sort string, err error) {
	for _, k := range ks {
		name := aws.ToString(k.AttributeName)
		if defs[name] != types.ScalarAttributeTypeS {
			return "", "", validation("ddbmodel: key attribute %s: only string keys are modelled", name)
		}
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = name
		case types.KeyTypeRange:
			sort = name
		}
	}
	if hash == "" {
		return "", "", validation("One or more parameter values were invalid: no partition key")
	}
	return hash, sort, nil
}

// UpdateTimeToLive turns TTL on for a table's attribute, or off.
func (m *Model) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.tableOf(in.TableName)
	if err != nil {
		return nil, apiError("UpdateTimeToLive", err)
	}
	spec := in.TimeToLiveSpecification
	if spec == nil || aws.ToString(spec.AttributeName) == "" {
		return nil, apiError("UpdateTimeToLive", validation("TimeToLiveSpecification needs an AttributeName"))
	}
	t.ttl = ""
	if aws.ToBool(spec.Enabled) {
		t.ttl = aws.ToString(spec.AttributeName)
	}
	return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: spec}, nil
}

// GetItem reads one item, eventually consistent unless ConsistentRead.
func (m *Model) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	var out *dynamodb.GetItemOutput
	err := m.call(ctx, Call{Op: "GetItem", Table: aws.ToString(in.TableName), Key: m.keyText(in.TableName, in.Key), Attempt: func() error {
		return m.do(ctx, func(*[]Write) error {
			t, err := m.tableOf(in.TableName)
			if err != nil {
				return err
			}
			key, _, err := t.keyOf(in.Key)
			if err != nil {
				return err
			}
			ps, err := m.exprs(in.ExpressionAttributeNames, nil, exprText{kindProjection, aws.ToString(in.ProjectionExpression)})
			if err != nil {
				return err
			}
			out = &dynamodb.GetItemOutput{Item: project(m.read(t, key, aws.ToBool(in.ConsistentRead)), ps[0], in.ExpressionAttributeNames)}
			return nil
		})
	}})
	return out, apiError("GetItem", err)
}

// project keeps the attributes a projection names (top-level names only);
// nil keeps them all.
func project(it item, p *parsed, names map[string]string) map[string]types.AttributeValue {
	if it == nil {
		return nil
	}
	if p == nil {
		return copyItem(it)
	}
	e := env{names: names}
	out := make(map[string]types.AttributeValue, len(p.proj))
	for _, path := range p.proj {
		n := e.name(path[0])
		if v, ok := it[n]; ok {
			out[n] = v
		}
	}
	return out
}

// checkProjection refuses a projection of nested paths, which the model
// does not read.
func checkProjection(p *parsed) error {
	if p == nil {
		return nil
	}
	for _, path := range p.proj {
		if len(path) > 1 {
			return validation("ddbmodel: a projection of nested paths is not modelled")
		}
	}
	return nil
}

// conditionFailed is the answer to a write whose condition failed: with
// the item as it is when ReturnValuesOnConditionCheckFailure is ALL_OLD.
// See "Condition expressions"
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html)
// and UpdateItem
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html).
func conditionFailed(old item, rv types.ReturnValuesOnConditionCheckFailure) error {
	e := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if rv == types.ReturnValuesOnConditionCheckFailureAllOld {
		e.Item = copyItem(old)
	}
	return e
}

// UpdateItem updates one item, creating it when it is absent, if its
// condition holds against the item as it is now.
func (m *Model) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	var out *dynamodb.UpdateItemOutput
	err := m.call(ctx, Call{Op: "UpdateItem", Table: aws.ToString(in.TableName), Key: m.keyText(in.TableName, in.Key), Write: true, Attempt: func() error {
		return m.do(ctx, func(ws *[]Write) error {
			t, err := m.tableOf(in.TableName)
			if err != nil {
				return err
			}
			key, keyItem, err := t.keyOf(in.Key)
			if err != nil {
				return err
			}
			if aws.ToString(in.UpdateExpression) == "" {
				return validation("ddbmodel: an UpdateItem without an UpdateExpression is not modelled")
			}
			ps, err := m.exprs(in.ExpressionAttributeNames, in.ExpressionAttributeValues,
				exprText{kindUpdate, aws.ToString(in.UpdateExpression)}, exprText{kindCondition, aws.ToString(in.ConditionExpression)})
			if err != nil {
				return err
			}
			e := env{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues}
			old := t.latest(key)
			if ps[1] != nil && !e.holds(old, ps[1].cond) {
				return conditionFailed(old, in.ReturnValuesOnConditionCheckFailure)
			}
			next, err := e.apply(old, ps[0].update, keyItem)
			if err != nil {
				return err
			}
			size, err := t.checkItem(next)
			if err != nil {
				return err
			}
			out = &dynamodb.UpdateItemOutput{}
			switch in.ReturnValues {
			case types.ReturnValueAllNew:
				out.Attributes = copyItem(next)
			case types.ReturnValueAllOld:
				out.Attributes = copyItem(old)
			case types.ReturnValueNone, "":
			default:
				return validation("ddbmodel: ReturnValues %s is not modelled", in.ReturnValues)
			}
			m.write(t, key, next, size, m.now(), false, ws)
			return nil
		})
	}})
	return out, apiError("UpdateItem", err)
}

// DeleteItem deletes one item, if its condition holds.
func (m *Model) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	var out *dynamodb.DeleteItemOutput
	err := m.call(ctx, Call{Op: "DeleteItem", Table: aws.ToString(in.TableName), Key: m.keyText(in.TableName, in.Key), Write: true, Attempt: func() error {
		return m.do(ctx, func(ws *[]Write) error {
			t, err := m.tableOf(in.TableName)
			if err != nil {
				return err
			}
			key, _, err := t.keyOf(in.Key)
			if err != nil {
				return err
			}
			ps, err := m.exprs(in.ExpressionAttributeNames, in.ExpressionAttributeValues, exprText{kindCondition, aws.ToString(in.ConditionExpression)})
			if err != nil {
				return err
			}
			old := t.latest(key)
			if ps[0] != nil && !(env{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues}).holds(old, ps[0].cond) {
				return conditionFailed(old, in.ReturnValuesOnConditionCheckFailure)
			}
			out = &dynamodb.DeleteItemOutput{}
			if in.ReturnValues == types.ReturnValueAllOld {
				out.Attributes = copyItem(old)
			}
			if old != nil {
				m.write(t, key, nil, 0, m.now(), false, ws)
			}
			return nil
		})
	}})
	return out, apiError("DeleteItem", err)
}

// tokenWindow is how long a ClientRequestToken makes a transaction
// idempotent: "A client request token is valid for 10 minutes after the
// first request that uses it is completed" (TransactWriteItems,
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
const tokenWindow = 10 * time.Minute

// txnToken is a transaction a token committed: its request's fingerprint,
// and when.
type txnToken struct {
	fingerprint uint64
	at          time.Time
}

// maxTransactItems bounds a transaction's actions.
const maxTransactItems = 100

// action is one action of a transaction, read.
type action struct {
	t      *table
	key    string
	keyIt  item
	cond   *parsed
	upd    *parsed
	put    item
	del    bool
	env    env
	rvOnCF types.ReturnValuesOnConditionCheckFailure
}

// TransactWriteItems writes its actions all or none: when a condition
// fails (or an item would be invalid) it writes nothing and answers
// TransactionCanceledException, with a reason per action in the order of
// the request, "None" for those that would have succeeded and the item
// where ReturnValuesOnConditionCheckFailure asks. A request with the
// ClientRequestToken of one committed less than 10 minutes ago is answered
// as that one was, without writing again; the SDK fills a token in when
// the caller names none, and sends the same one again when it retries.
func (m *Model) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	token := aws.ToString(in.ClientRequestToken)
	if token == "" {
		token = m.newToken()
	}
	fp := fingerprint(in.TransactItems)
	c := Call{Op: "TransactWriteItems", Write: true}
	if len(in.TransactItems) > 0 {
		table, key := firstTarget(in.TransactItems[0])
		c.Table, c.Key = aws.ToString(table), m.keyText(table, key)
	}
	c.Attempt = func() error {
		return m.do(ctx, func(ws *[]Write) error { return m.transact(in.TransactItems, token, fp, ws) })
	}
	if err := m.call(ctx, c); err != nil {
		return nil, apiError("TransactWriteItems", err)
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// firstTarget is the table and the key (or item) an action names.
func firstTarget(a types.TransactWriteItem) (*string, map[string]types.AttributeValue) {
	switch {
	case a.Put != nil:
		return a.Put.TableName, a.Put.Item
	case a.Update != nil:
		return a.Update.TableName, a.Update.Key
	case a.Delete != nil:
		return a.Delete.TableName, a.Delete.Key
	case a.ConditionCheck != nil:
		return a.ConditionCheck.TableName, a.ConditionCheck.Key
	}
	return nil, nil
}

func (m *Model) transact(items []types.TransactWriteItem, token string, fp uint64, ws *[]Write) error {
	now := m.now()
	m.forgetTokens(now)
	if done, ok := m.tokens[token]; ok {
		if done.fingerprint != fp {
			return &types.IdempotentParameterMismatchException{Message: aws.String("The request uses the same client token as a previous, but non-identical request.")}
		}
		return nil
	}
	if len(items) == 0 || len(items) > maxTransactItems {
		return validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length between 1 and %d", maxTransactItems)
	}
	acts := make([]action, len(items))
	for i, a := range items {
		if err := m.readAction(a, &acts[i]); err != nil {
			return err
		}
		for _, b := range acts[:i] {
			if b.t == acts[i].t && b.key == acts[i].key {
				return validation("Transaction request cannot include multiple operations on one item")
			}
		}
	}
	reasons := make([]types.CancellationReason, len(acts))
	next := make([]item, len(acts))
	sizes := make([]int, len(acts))
	cancelled := false
	for i, a := range acts {
		old := a.t.latest(a.key)
		reasons[i] = types.CancellationReason{Code: aws.String("None")}
		if a.cond != nil && !a.env.holds(old, a.cond.cond) {
			reasons[i] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Message: aws.String("The conditional request failed")}
			if a.rvOnCF == types.ReturnValuesOnConditionCheckFailureAllOld {
				reasons[i].Item = copyItem(old)
			}
			cancelled = true
			continue
		}
		var err error
		switch {
		case a.put != nil:
			next[i] = a.put
		case a.upd != nil:
			next[i], err = a.env.apply(old, a.upd.update, a.keyIt)
		case a.del:
			next[i] = nil
		default: // a ConditionCheck writes nothing
			next[i] = old
		}
		if err == nil {
			sizes[i], err = a.t.checkItem(next[i])
		}
		if err != nil {
			reasons[i] = types.CancellationReason{Code: aws.String("ValidationError"), Message: aws.String(errorMessage(err))}
			cancelled = true
		}
	}
	if cancelled {
		codes := make([]string, len(reasons))
		for i, r := range reasons {
			codes[i] = aws.ToString(r.Code)
		}
		return &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
			CancellationReasons: reasons,
		}
	}
	for i, a := range acts {
		if a.put == nil && a.upd == nil && !a.del {
			continue
		}
		if a.del && a.t.latest(a.key) == nil {
			continue
		}
		m.write(a.t, a.key, next[i], sizes[i], now, false, ws)
	}
	m.tokens[token] = txnToken{fingerprint: fp, at: now}
	m.tokenOrder = append(m.tokenOrder, token)
	return nil
}

// readAction reads one action of a transaction: its table, its key and its
// expressions.
func (m *Model) readAction(a types.TransactWriteItem, out *action) error {
	n := 0
	var (
		table       *string
		key         map[string]types.AttributeValue
		names       map[string]string
		values      map[string]types.AttributeValue
		cond, upd   string
		rv          types.ReturnValuesOnConditionCheckFailure
		put         map[string]types.AttributeValue
		del, isPut  bool
		isCondCheck bool
	)
	if p := a.Put; p != nil {
		n++
		table, put, names, values, cond, rv, isPut = p.TableName, p.Item, p.ExpressionAttributeNames, p.ExpressionAttributeValues, aws.ToString(p.ConditionExpression), p.ReturnValuesOnConditionCheckFailure, true
	}
	if u := a.Update; u != nil {
		n++
		table, key, names, values, cond, upd, rv = u.TableName, u.Key, u.ExpressionAttributeNames, u.ExpressionAttributeValues, aws.ToString(u.ConditionExpression), aws.ToString(u.UpdateExpression), u.ReturnValuesOnConditionCheckFailure
		if upd == "" {
			return validation("ddbmodel: an Update without an UpdateExpression is not modelled")
		}
	}
	if d := a.Delete; d != nil {
		n++
		table, key, names, values, cond, rv, del = d.TableName, d.Key, d.ExpressionAttributeNames, d.ExpressionAttributeValues, aws.ToString(d.ConditionExpression), d.ReturnValuesOnConditionCheckFailure, true
	}
	if c := a.ConditionCheck; c != nil {
		n++
		table, key, names, values, cond, rv, isCondCheck = c.TableName, c.Key, c.ExpressionAttributeNames, c.ExpressionAttributeValues, aws.ToString(c.ConditionExpression), c.ReturnValuesOnConditionCheckFailure, true
		if cond == "" {
			return validation("A ConditionCheck needs a ConditionExpression")
		}
	}
	if n != 1 {
		return validation("TransactItems can only contain one of Check, Put, Update or Delete")
	}
	t, err := m.tableOf(table)
	if err != nil {
		return err
	}
	if isPut {
		if key = map[string]types.AttributeValue{t.hash: put[t.hash]}; put[t.hash] == nil {
			return validation("One or more parameter values were invalid: Missing the key %s in the item", t.hash)
		}
		for _, v := range put {
			if err := checkValue(v); err != nil {
				return err
			}
		}
	}
	k, keyIt, err := t.keyOf(key)
	if err != nil {
		return err
	}
	ps, err := m.exprs(names, values, exprText{kindCondition, cond}, exprText{kindUpdate, upd})
	if err != nil {
		return err
	}
	*out = action{t: t, key: k, keyIt: keyIt, cond: ps[0], upd: ps[1], del: del, env: env{names: names, values: values}, rvOnCF: rv}
	if isPut {
		out.put = cloneItem(put)
	}
	_ = isCondCheck
	return nil
}

// forgetTokens drops the tokens whose 10 minutes have passed.
func (m *Model) forgetTokens(now time.Time) {
	n := 0
	for n < len(m.tokenOrder) && !m.tokens[m.tokenOrder[n]].at.Add(tokenWindow).After(now) {
		delete(m.tokens, m.tokenOrder[n])
		n++
	}
	m.tokenOrder = m.tokenOrder[n:]
}

// errorMessage is a service error's message.
func errorMessage(err error) string {
	type messager interface{ ErrorMessage() string }
	if e, ok := err.(messager); ok {
		return e.ErrorMessage()
	}
	return err.Error()
}

// fingerprint digests a transaction's request, so that a token reused with
// other parameters is told apart.
func fingerprint(items []types.TransactWriteItem) uint64 {
	h := fnv.New64a()
	w := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	for _, a := range items {
		switch {
		case a.Put != nil:
			w("put")
			w(aws.ToString(a.Put.TableName))
			writeItem(w, a.Put.Item)
			w(aws.ToString(a.Put.ConditionExpression))
			writeNames(w, a.Put.ExpressionAttributeNames)
			writeItem(w, a.Put.ExpressionAttributeValues)
		case a.Update != nil:
			w("update")
			w(aws.ToString(a.Update.TableName))
			writeItem(w, a.Update.Key)
			w(aws.ToString(a.Update.UpdateExpression))
			w(aws.ToString(a.Update.ConditionExpression))
			writeNames(w, a.Update.ExpressionAttributeNames)
			writeItem(w, a.Update.ExpressionAttributeValues)
		case a.Delete != nil:
			w("delete")
			w(aws.ToString(a.Delete.TableName))
			writeItem(w, a.Delete.Key)
			w(aws.ToString(a.Delete.ConditionExpression))
			writeNames(w, a.Delete.ExpressionAttributeNames)
			writeItem(w, a.Delete.ExpressionAttributeValues)
		case a.ConditionCheck != nil:
			w("check")
			w(aws.ToString(a.ConditionCheck.TableName))
			writeItem(w, a.ConditionCheck.Key)
			w(aws.ToString(a.ConditionCheck.ConditionExpression))
			writeNames(w, a.ConditionCheck.ExpressionAttributeNames)
			writeItem(w, a.ConditionCheck.ExpressionAttributeValues)
		}
	}
	return h.Sum64()
}

func writeNames(w func(string), names map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(names)) {
		w(k)
		w(names[k])
	}
}

func writeItem(w func(string), it map[string]types.AttributeValue) {
	for _, k := range slices.Sorted(maps.Keys(it)) {
		w(k)
		writeValue(w, it[k])
	}
	w("}")
}

func writeValue(w func(string), v types.AttributeValue) {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		w("S" + x.Value)
	case *types.AttributeValueMemberN:
		w("N" + x.Value)
	case *types.AttributeValueMemberB:
		w("B" + string(x.Value))
	case *types.AttributeValueMemberBOOL:
		w("BOOL" + strconv.FormatBool(x.Value))
	case *types.AttributeValueMemberNULL:
		w("NULL")
	case *types.AttributeValueMemberL:
		w("L")
		for _, e := range x.Value {
			writeValue(w, e)
		}
		w("]")
	case *types.AttributeValueMemberM:
		w("M")
		writeItem(w, x.Value)
	case *types.AttributeValueMemberSS:
		w("SS" + strings.Join(slices.Sorted(slices.Values(x.Value)), "\x00"))
	case *types.AttributeValueMemberNS:
		w("NS" + strings.Join(slices.Sorted(slices.Values(x.Value)), "\x00"))
	case *types.AttributeValueMemberBS:
		w("BS")
		for _, b := range x.Value {
			w(string(b))
		}
	}
}

// maxQueryBytes is the most a Query reads in one page: "A single Query
// only returns a result set that fits within the 1 MB size limit"
// ("Paginating table query results in DynamoDB",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.Pagination.html).
const maxQueryBytes = 1 << 20

// Query reads a partition of a table or of a global secondary index, in
// sort key order (ScanIndexForward), at most Limit items and 1 MB a page,
// from ExclusiveStartKey on. It answers LastEvaluatedKey whenever it
// stopped at either bound, whether or not more items follow. An index is
// read eventually consistent, and refuses ConsistentRead.
func (m *Model) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	var out *dynamodb.QueryOutput
	err := m.call(ctx, Call{Op: "Query", Table: aws.ToString(in.TableName), Attempt: func() error {
		return m.do(ctx, func(*[]Write) error {
			var err error
			out, err = m.query(in)
			return err
		})
	}})
	return out, apiError("Query", err)
}

func (m *Model) query(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	t, err := m.tableOf(in.TableName)
	if err != nil {
		return nil, err
	}
	var g *gsi
	hash, sort := t.hash, ""
	if name := aws.ToString(in.IndexName); name != "" {
		for _, x := range t.gsis {
			if x.name == name {
				g = x
			}
		}
		if g == nil {
			return nil, validation("The table does not have the specified index: %s", name)
		}
		if aws.ToBool(in.ConsistentRead) {
			return nil, validation("Consistent reads are not supported on global secondary indexes")
		}
		hash, sort = g.hash, g.sort
	}
	if aws.ToString(in.KeyConditionExpression) == "" {
		return nil, validation("ddbmodel: a Query without a KeyConditionExpression is not modelled")
	}
	if in.FilterExpression != nil {
		return nil, validation("ddbmodel: a FilterExpression is not modelled")
	}
	ps, err := m.exprs(in.ExpressionAttributeNames, in.ExpressionAttributeValues,
		exprText{kindCondition, aws.ToString(in.KeyConditionExpression)}, exprText{kindProjection, aws.ToString(in.ProjectionExpression)})
	if err != nil {
		return nil, err
	}
	if err := checkProjection(ps[1]); err != nil {
		return nil, err
	}
	e := env{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues}
	part, sortCond, err := keyCondition(ps[0].cond, e, hash, sort)
	if err != nil {
		return nil, err
	}
	var rows []row
	if g != nil {
		rows = m.gsiRows(t, g, part)
	} else if it := m.read(t, part, aws.ToBool(in.ConsistentRead)); it != nil {
		rows = []row{{key: part, it: it}}
	}
	slices.SortFunc(rows, compareRows)
	forward := in.ScanIndexForward == nil || *in.ScanIndexForward
	if !forward {
		slices.Reverse(rows)
	}
	var start *row
	if len(in.ExclusiveStartKey) > 0 {
		s, ok1 := in.ExclusiveStartKey[t.hash].(*types.AttributeValueMemberS)
		r := row{}
		if ok1 {
			r.key = s.Value
		}
		if sort != "" {
			v, ok := in.ExclusiveStartKey[sort].(*types.AttributeValueMemberS)
			if !ok {
				return nil, validation("The provided starting key is invalid")
			}
			r.sort = v.Value
		}
		if !ok1 {
			return nil, validation("The provided starting key is invalid")
		}
		start = &r
	}
	limit := int(aws.ToInt32(in.Limit))
	if in.Limit != nil && limit < 1 {
		return nil, validation("Limit must be at least 1")
	}
	out := &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{}}
	size := 0
	var last *row
	stopped := false
	for i := range rows {
		r := rows[i]
		if start != nil {
			c := compareRows(r, *start)
			if (forward && c <= 0) || (!forward && c >= 0) {
				continue
			}
		}
		if sortCond != nil && !e.holds(r.it, sortCond) {
			continue
		}
		if (limit > 0 && len(out.Items) == limit) || size >= maxQueryBytes {
			stopped = true
			break
		}
		it := r.it
		if g != nil {
			it = g.project(t, it)
		}
		size += ItemSize(it)
		out.Items = append(out.Items, project(it, ps[1], in.ExpressionAttributeNames))
		last = &rows[i]
	}
	if !stopped && limit > 0 && len(out.Items) == limit {
		stopped = true
	}
	out.Count = int32(len(out.Items))
	out.ScannedCount = out.Count
	if stopped && last != nil {
		lek := map[string]types.AttributeValue{t.hash: &types.AttributeValueMemberS{Value: last.key}}
		if g != nil {
			lek[g.hash] = &types.AttributeValueMemberS{Value: part}
			if g.sort != "" {
				lek[g.sort] = &types.AttributeValueMemberS{Value: last.sort}
			}
		}
		out.LastEvaluatedKey = lek
	}
	return out, nil
}

// keyCondition reads a key condition: equality on the partition key, and
// at most one condition on the sort key (returned to be held against each
// item).
func keyCondition(c *condition, e env, hash, sort string) (string, *condition, error) {
	var terms []*condition
	var flat func(c *condition)
	flat = func(c *condition) {
		if c.kind == cAnd {
			flat(c.l)
			flat(c.r)
			return
		}
		terms = append(terms, c)
	}
	flat(c)
	part, found := "", false
	var sortCond *condition
	for _, t := range terms {
		name := ""
		switch {
		case (t.kind == cCmp || t.kind == cBetween) && t.args[0].kind == oPath && len(t.args[0].path) == 1:
			name = e.name(t.args[0].path[0])
		case t.kind == cBeginsWith && t.args[0].kind == oPath && len(t.args[0].path) == 1:
			name = e.name(t.args[0].path[0])
		default:
			return "", nil, validation("Invalid KeyConditionExpression: unsupported condition")
		}
		switch {
		case name == hash && t.kind == cCmp && t.op == "=" && t.args[1].kind == oValue && !found:
			v, ok := e.values[t.args[1].value].(*types.AttributeValueMemberS)
			if !ok {
				return "", nil, validation("One or more parameter values were invalid: Condition parameter type does not match schema type")
			}
			part, found = v.Value, true
		case name == sort && sort != "" && sortCond == nil && t.op != "<>":
			sortCond = t
		default:
			return "", nil, validation("Query condition missed key schema element or has an unsupported condition: %s", name)
		}
	}
	if !found {
		return "", nil, validation("Query condition missed key schema element: %s", hash)
	}
	return part, sortCond, nil
}

// maxBatchKeys and maxBatchBytes bound a BatchGetItem: "A single operation
// can retrieve up to 16 MB of data, which can contain as many as 100
// items", and more than 100 keys is a ValidationException (BatchGetItem,
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html).
const (
	maxBatchKeys  = 100
	maxBatchBytes = 16 << 20
)

// BatchGetItem reads up to 100 items of one or more tables, eventually
// consistent unless a table's ConsistentRead. The keys Unprocessed names,
// and those past 16 MB, come back in UnprocessedKeys, with the table's
// projection; when no key at all was read, it answers
// ProvisionedThroughputExceededException, as DynamoDB does.
func (m *Model) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	var out *dynamodb.BatchGetItemOutput
	c := Call{Op: "BatchGetItem"}
	names := slices.Sorted(maps.Keys(in.RequestItems))
	if len(names) > 0 {
		c.Table = names[0]
		if ks := in.RequestItems[names[0]].Keys; len(ks) > 0 {
			c.Key = m.keyText(aws.String(names[0]), ks[0])
		}
	}
	c.Attempt = func() error {
		return m.do(ctx, func(*[]Write) error {
			var err error
			out, err = m.batchGet(in, names)
			return err
		})
	}
	err := m.call(ctx, c)
	return out, apiError("BatchGetItem", err)
}

func (m *Model) batchGet(in *dynamodb.BatchGetItemInput, names []string) (*dynamodb.BatchGetItemOutput, error) {
	total := 0
	for _, ka := range in.RequestItems {
		total += len(ka.Keys)
	}
	if total == 0 {
		return nil, validation("The requestItems parameter is required for BatchGetItem")
	}
	if total > maxBatchKeys {
		return nil, validation("Too many items requested for the BatchGetItem call")
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}, UnprocessedKeys: map[string]types.KeysAndAttributes{}}
	read, size := 0, 0
	for _, name := range names {
		ka := in.RequestItems[name]
		t, err := m.tableOf(aws.String(name))
		if err != nil {
			return nil, err
		}
		ps, err := m.exprs(ka.ExpressionAttributeNames, nil, exprText{kindProjection, aws.ToString(ka.ProjectionExpression)})
		if err != nil {
			return nil, err
		}
		if err := checkProjection(ps[0]); err != nil {
			return nil, err
		}
		keys := make([]string, len(ka.Keys))
		for i, k := range ka.Keys {
			if keys[i], _, err = t.keyOf(k); err != nil {
				return nil, err
			}
			if slices.Contains(keys[:i], keys[i]) {
				return nil, validation("Provided list of item keys contains duplicates")
			}
		}
		var left []map[string]types.AttributeValue
		for i, k := range keys {
			if (m.o.Unprocessed != nil && m.o.Unprocessed(name, k)) || size >= maxBatchBytes {
				left = append(left, ka.Keys[i])
				continue
			}
			read++
			v := m.readVersion(t, k, aws.ToBool(ka.ConsistentRead))
			if v.item == nil {
				continue
			}
			size += v.size
			out.Responses[name] = append(out.Responses[name], project(v.item, ps[0], ka.ExpressionAttributeNames))
		}
		if len(left) > 0 {
			rest := ka
			rest.Keys = left
			out.UnprocessedKeys[name] = rest
		}
	}
	if read == 0 {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("ddbmodel: every key of the batch was left unprocessed")}
	}
	return out, nil
}
