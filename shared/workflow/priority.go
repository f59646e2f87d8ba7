package workflow

// Priority is an order's class under load: which orders the Submission
// sheds first when the Agents' queues fill (see shared/admission). It
// changes nothing else: an admitted order of any class runs the same way.
// The state record stores it only when it is not normal, so the common
// order's record (and its write units) stays as it was.
type Priority string

const (
	// PriorityHigh is shed last: only once a queue holds the whole backlog.
	PriorityHigh Priority = "high"
	// PriorityNormal is the default: an order that names no priority.
	PriorityNormal Priority = "normal"
	// PriorityLow is shed first.
	PriorityLow Priority = "low"
)

// Priorities lists the classes, highest first.
var Priorities = []Priority{PriorityHigh, PriorityNormal, PriorityLow}

// ParsePriority reads a class by name; false for any other string.
func ParsePriority(s string) (Priority, bool) {
	for _, p := range Priorities {
		if string(p) == s {
			return p, true
		}
	}
	return "", false
}

// Or returns p, or normal when p is empty (a record that names no class).
func (p Priority) Or() Priority {
	if p == "" {
		return PriorityNormal
	}
	return p
}

// Stored is p as a record keeps it: empty for normal.
func (p Priority) Stored() Priority {
	if p == PriorityNormal {
		return ""
	}
	return p
}
