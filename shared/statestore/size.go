package statestore

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize is the size DynamoDB bills an item by, by its published rules:
// each attribute's name plus its value, a string by its UTF-8 bytes, a
// number by about one byte per two significant digits plus one, a boolean
// or null one byte, a list or map three bytes plus one per element plus its
// elements (a map's keys included). A write costs one unit per started KiB
// of the larger of the item before and after it, so this is what keeps the
// hot path at one unit a write.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		return setSize(v.Value)
	case *types.AttributeValueMemberNS:
		n := 3
		for _, e := range v.Value {
			n += 1 + numberSize(e)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 3
		for _, e := range v.Value {
			n += 1 + len(e)
		}
		return n
	}
	return 0
}

func setSize(ss []string) int {
	n := 3
	for _, s := range ss {
		n += 1 + len(s)
	}
	return n
}

// numberSize: DynamoDB stores a number in about one byte per two
// significant digits, plus one.
func numberSize(s string) int {
	digits := strings.Trim(strings.TrimLeft(strings.TrimPrefix(s, "-"), "0"), ".")
	digits = strings.ReplaceAll(digits, ".", "")
	digits = strings.TrimRight(digits, "0")
	return (len(digits)+1)/2 + 1
}
