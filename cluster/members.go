package cluster

// Members is a node's view of the live nodes of its cluster. The count
// feeds the strategies that split a limit between nodes (local, and the
// fair shares of leased).
type Members interface {
	// Self is this node's name, unique in the cluster.
	Self() string
	// Count is the number of live nodes, this one included; at least 1.
	Count() int
}

// MemberRanker is implemented by Members that know the names of the live
// nodes (Membership does). Rank is this node's 0-based position among them
// in an order all nodes agree on (sorted names); it lets the local strategy
// hand the remainder of a division to the first nodes instead of dropping
// it.
type MemberRanker interface {
	Rank() int
}

// StaticMembers is a fixed membership: a node that knows the size of its
// fleet from its configuration, or a test.
type StaticMembers struct {
	Name  string
	Nodes int
}

// Self implements Members.
func (s StaticMembers) Self() string { return s.Name }

// Count implements Members; a Nodes below 1 counts as 1.
func (s StaticMembers) Count() int { return max(s.Nodes, 1) }
