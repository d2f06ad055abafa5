package engine

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/flxproto/felix"
)

// Consumer-group defaults (GroupConfig fields left zero take these).
const (
	// DefaultGroupMaxAttempts is the attempt bound: a record delivered this
	// many times and then nacked (or let time out) is dead-lettered.
	DefaultGroupMaxAttempts = 5
	// DefaultGroupVisibility is how long a polled record stays claimed
	// when the poll names no visibility_ms.
	DefaultGroupVisibility = 30 * time.Second
	// DefaultGroupMaxVisibility caps visibility_ms and group_extend.
	DefaultGroupMaxVisibility = 12 * time.Hour
	// DefaultGroupMaxWait caps a poll's wait_ms.
	DefaultGroupMaxWait = 5 * time.Second
	// DefaultMaxGroupsPerShard bounds the groups of one shard; creating
	// another is refused with limit_exceeded. With DefaultGroupMaxPending
	// (claims of ~100 bytes each) a shard's groups hold at most about
	// 64 MiB of claim state.
	DefaultMaxGroupsPerShard = 64
	// DefaultGroupMaxPending bounds one group's claimed plus owed records:
	// a poll hands out no fresh record while the group holds this many.
	DefaultGroupMaxPending = 10_000
	// DefaultGroupMaxDeadLetters bounds one group's dead letters; a record
	// dead-lettered beyond it is discarded (Stats.DeadLettersDropped).
	DefaultGroupMaxDeadLetters = 10_000
	// MaxPollRecords and MaxPollBytes bound one group_records answer (at
	// least one record is returned whatever its size).
	MaxPollRecords = 1000
	MaxPollBytes   = 4 << 20
	// MaxGroupName is the longest group name accepted.
	MaxGroupName = 255
	// DefaultMaxTenantClaims bounds the claimed, owed and dead-lettered
	// records of all of one tenant's groups (≈ 100 bytes each);
	// DefaultMaxTotalClaims those of every group, by fair share (a tenant
	// over its share is refused at the bound, one within it is not).
	DefaultMaxTenantClaims = 1_000_000
	DefaultMaxTotalClaims  = 4_000_000
	// DefaultMaxTenantGroups bounds one tenant's consumer groups (all its
	// shards), DefaultMaxTotalGroups every tenant's, by fair share.
	DefaultMaxTenantGroups = 4096
	DefaultMaxTotalGroups  = 16384
)

// GroupConfig bounds consumer groups. Zero fields take the defaults above.
type GroupConfig struct {
	MaxAttempts    uint32
	Visibility     time.Duration
	MaxVisibility  time.Duration
	MaxWait        time.Duration
	MaxGroups      int // per shard
	MaxPending     int // claimed + owed records per group
	MaxDeadLetters int // per group
	// MaxTenantClaims and MaxTotalClaims bound the claimed, owed and
	// dead-lettered records per tenant and engine-wide; MaxTenantGroups
	// and MaxTotalGroups the groups. Beyond them a poll hands out no fresh
	// record (limit_exceeded when it has nothing else to hand out) and a
	// new group is refused limit_exceeded.
	MaxTenantClaims, MaxTotalClaims int
	MaxTenantGroups, MaxTotalGroups int
}

func (c GroupConfig) withDefaults() GroupConfig {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultGroupMaxAttempts
	}
	if c.Visibility <= 0 {
		c.Visibility = DefaultGroupVisibility
	}
	if c.MaxVisibility <= 0 {
		c.MaxVisibility = DefaultGroupMaxVisibility
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultGroupMaxWait
	}
	if c.MaxGroups <= 0 {
		c.MaxGroups = DefaultMaxGroupsPerShard
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultGroupMaxPending
	}
	if c.MaxDeadLetters <= 0 {
		c.MaxDeadLetters = DefaultGroupMaxDeadLetters
	}
	if c.MaxTenantClaims <= 0 {
		c.MaxTenantClaims = DefaultMaxTenantClaims
	}
	if c.MaxTotalClaims <= 0 {
		c.MaxTotalClaims = DefaultMaxTotalClaims
	}
	if c.MaxTenantGroups <= 0 {
		c.MaxTenantGroups = DefaultMaxTenantGroups
	}
	if c.MaxTotalGroups <= 0 {
		c.MaxTotalGroups = DefaultMaxTotalGroups
	}
	return c
}

// GroupRef names a consumer group on one shard of a stream.
type GroupRef struct {
	Topic
	Shard uint32
	Group string
}

// group is one consumer group's state on a shard (guarded by shard.mu).
// A record is either not yet handed out (offset ≥ next), claimed or owed
// (in claims), dead-lettered (in dead), or settled.
type group struct {
	next   uint64
	claims map[uint64]*claim
	peak   int      // most claims since the map was last rebuilt (shrunk)
	dead   []uint64 // sorted
}

// claim is a record handed out at least once and not settled: claimed
// until `until`, or owed (to be redelivered from notBefore).
type claim struct {
	attempts  uint32
	owed      bool
	until     time.Time
	notBefore time.Time
}

// GroupRecord is one record handed out by GroupPoll.
type GroupRecord struct {
	Offset    uint64
	Payload   []byte
	Attempts  uint32 // deliveries including this one
	Publisher string
	Timestamp uint64 // µs since the epoch
}

// GroupPollRequest is a group_poll.
type GroupPollRequest struct {
	GroupRef
	// Max is the most records to return (capped at MaxPollRecords).
	Max int
	// Visibility is how long the records stay claimed (0 = the default;
	// capped at MaxVisibility).
	Visibility time.Duration
	// Wait is how long to wait for a record when none is ready (0 = answer
	// at once; capped at MaxWait).
	Wait time.Duration
}

// GroupInfo describes a group (group_describe).
type GroupInfo struct {
	// Committed is the lowest offset not yet settled; HasCommitted is false
	// when the group does not exist.
	Committed    uint64
	HasCommitted bool
	// Tail is the shard's next offset.
	Tail uint64
	// InFlight counts claimed records, Owed records waiting for
	// (re)delivery (owed redeliveries plus records never handed out), and
	// DeadLetters the records set aside.
	InFlight, Owed, DeadLetters uint64
}

// groupShard returns the durable shard of ref and checks the group name.
func (e *Engine) groupShard(ref GroupRef) (*shard, error) {
	if ref.Group == "" || len(ref.Group) > MaxGroupName {
		return nil, errorf(felix.CodeInvalidRequest, "group name must be 1.."+strconv.Itoa(MaxGroupName)+" bytes")
	}
	sh, err := e.shard(ref.Topic, ref.Shard)
	if err != nil {
		return nil, err
	}
	if !sh.st.cfg.Durable {
		return nil, errorf(felix.CodeInvalidRequest, "consumer groups need a durable stream")
	}
	return sh, nil
}

// groupLocked returns the group, creating it at the shard's oldest
// retained offset when create is set. The caller holds sh.mu.
func (sh *shard) groupLocked(name string, create bool) (*group, error) {
	if g := sh.groups[name]; g != nil {
		return g, nil
	}
	if !create {
		return nil, nil
	}
	if len(sh.groups) >= sh.st.e.cfg.Groups.MaxGroups {
		return nil, errorf(felix.CodeLimitExceeded, "too many consumer groups on this shard")
	}
	if err := sh.st.e.groupCount.take(sh.st.topic.Tenant, 1); err != nil {
		return nil, err
	}
	if sh.groups == nil {
		sh.groups = make(map[string]*group)
	}
	g := &group{next: sh.base, claims: make(map[uint64]*claim)}
	sh.groups[name] = g
	return g, nil
}

// signalLocked wakes every poll waiting for a record on the shard.
func (sh *shard) signalLocked() {
	if sh.wake != nil {
		close(sh.wake)
		sh.wake = nil
	}
}

func (sh *shard) waitLocked() <-chan struct{} {
	if sh.wake == nil {
		sh.wake = make(chan struct{})
	}
	return sh.wake
}

// GroupPoll hands out up to req.Max records: owed redeliveries first
// (lowest offset first), then records never handed out. Each returned
// record is claimed for the visibility timeout and carries its attempt
// count. An empty result is not an error. With req.Wait it waits (up to
// the cap, or until ctx ends) for a record to become ready.
func (e *Engine) GroupPoll(ctx context.Context, req GroupPollRequest) ([]GroupRecord, error) {
	sh, err := e.groupShard(req.GroupRef)
	if err != nil {
		return nil, err
	}
	cfg := e.cfg.Groups
	vis := cfg.Visibility
	if req.Visibility > 0 {
		vis = min(req.Visibility, cfg.MaxVisibility)
	}
	n := min(max(req.Max, 1), MaxPollRecords)
	var deadline <-chan time.Time
	for {
		sh.mu.Lock()
		g, err := sh.groupLocked(req.Group, true)
		if err != nil {
			sh.mu.Unlock()
			return nil, err
		}
		out, err := sh.pollLocked(g, n, vis)
		if len(out) > 0 || req.Wait <= 0 || err != nil {
			sh.mu.Unlock()
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		wake := sh.waitLocked()
		sh.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(min(req.Wait, cfg.MaxWait))
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-wake:
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// pollLocked is one poll pass; the caller holds sh.mu. err, when set, is
// the claims budget's refusal of a fresh record.
func (sh *shard) pollLocked(g *group, limit int, vis time.Duration) (out []GroupRecord, err error) {
	now := sh.st.e.cfg.Now()
	sh.expireLocked(g, now)
	size := 0
	full := func(p []byte) bool {
		return len(out) >= limit || (len(out) > 0 && size+len(p) > MaxPollBytes)
	}
	var owed []uint64
	for off, c := range g.claims {
		if c.owed && !c.notBefore.After(now) {
			owed = append(owed, off)
		}
	}
	slices.Sort(owed)
	for _, off := range owed {
		if off < sh.base { // trimmed by retention: nothing left to deliver
			sh.dropClaimLocked(g, off)
			continue
		}
		r := sh.recs[sh.head+int(off-sh.base)]
		if full(r.payload()) {
			return out, nil
		}
		c := g.claims[off]
		c.attempts++
		c.owed, c.until = false, now.Add(vis)
		out = append(out, GroupRecord{Offset: off, Payload: r.payload(), Attempts: c.attempts, Publisher: r.seg.publisher, Timestamp: r.seg.ts})
		size += int(r.n)
	}
	g.next = max(g.next, sh.base)
	for g.next < sh.next && len(g.claims) < sh.st.e.cfg.Groups.MaxPending {
		off := g.next
		r := sh.recs[sh.head+int(off-sh.base)]
		if full(r.payload()) {
			break
		}
		if err = sh.st.e.claims.take(sh.st.topic.Tenant, 1); err != nil {
			break
		}
		g.claims[off] = &claim{attempts: 1, until: now.Add(vis)}
		g.next++
		out = append(out, GroupRecord{Offset: off, Payload: r.payload(), Attempts: 1, Publisher: r.seg.publisher, Timestamp: r.seg.ts})
		size += int(r.n)
	}
	return out, err
}

// dropClaimLocked forgets the claim on off and returns its place in the
// claims budget. The caller holds sh.mu.
func (sh *shard) dropClaimLocked(g *group, off uint64) {
	if _, ok := g.claims[off]; ok {
		delete(g.claims, off)
		sh.st.e.claims.give(sh.st.topic.Tenant, 1)
		g.claims = shrunk(g.claims, &g.peak)
	}
}

// expireLocked turns claims whose visibility ran out into owed records (or
// dead letters past the attempt bound).
func (sh *shard) expireLocked(g *group, now time.Time) {
	for off, c := range g.claims {
		if !c.owed && !c.until.After(now) {
			sh.releaseLocked(g, off, c, now)
		}
	}
}

// releaseLocked hands a claim back: owed from notBefore, or dead-lettered
// when it reached the attempt bound.
func (sh *shard) releaseLocked(g *group, off uint64, c *claim, notBefore time.Time) {
	if c.attempts >= sh.st.e.cfg.Groups.MaxAttempts {
		delete(g.claims, off)
		sh.deadLetterLocked(g, off)
		return
	}
	c.owed, c.notBefore = true, notBefore
	sh.signalLocked()
}

// deadLetterLocked sets off aside; its claim was just deleted, and its
// place in the claims budget passes to the dead letter (or is returned
// when the list is full or holds off already).
func (sh *shard) deadLetterLocked(g *group, off uint64) {
	if len(g.dead) >= sh.st.e.cfg.Groups.MaxDeadLetters {
		sh.st.e.st.deadDropped.Add(1)
		sh.st.e.claims.give(sh.st.topic.Tenant, 1)
		return
	}
	i, found := slices.BinarySearch(g.dead, off)
	if !found {
		g.dead = slices.Insert(g.dead, i, off)
	} else {
		sh.st.e.claims.give(sh.st.topic.Tenant, 1)
	}
}

// claimLocked returns the standing claim on off. attempts, when non-zero,
// must name the current delivery. A missing or superseded claim is
// stale_claim with retry class fatalRetry when attempts was named (or
// always, with strict).
func (sh *shard) claimLocked(ref GroupRef, off uint64, attempts uint32, strict bool) (*group, *claim, error) {
	g, _ := sh.groupLocked(ref.Group, false)
	var c *claim
	if g != nil {
		sh.expireLocked(g, sh.st.e.cfg.Now())
		c = g.claims[off]
	}
	if c == nil || c.owed || (attempts != 0 && c.attempts != attempts) {
		err := errorf(felix.CodeStaleClaim, "group "+ref.Group+" holds no claim on offset "+strconv.FormatUint(off, 10))
		if strict || attempts != 0 {
			err.Retry = felix.RetryFatal
		}
		return nil, nil, err
	}
	return g, c, nil
}

// GroupAck settles a claimed record: it is never delivered again. An offset
// the group holds no claim on is refused with stale_claim.
func (e *Engine) GroupAck(ref GroupRef, off uint64) error {
	sh, err := e.groupShard(ref)
	if err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, _, err := sh.claimLocked(ref, off, 0, false)
	if err != nil {
		return err
	}
	sh.dropClaimLocked(g, off)
	return nil
}

// GroupNack hands a claimed record back for redelivery after delay (0 = at
// once) with a higher attempt count; at the attempt bound it is
// dead-lettered instead. attempts, when non-zero, must name the current
// delivery.
func (e *Engine) GroupNack(ref GroupRef, off uint64, attempts uint32, delay time.Duration) error {
	sh, err := e.groupShard(ref)
	if err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, c, err := sh.claimLocked(ref, off, attempts, false)
	if err != nil {
		return err
	}
	sh.releaseLocked(g, off, c, e.cfg.Now().Add(min(delay, e.cfg.Groups.MaxVisibility)))
	return nil
}

// GroupExtend extends a claim by d (capped at MaxVisibility) from now and
// returns the granted time. d must be positive (invalid_request).
func (e *Engine) GroupExtend(ref GroupRef, off uint64, attempts uint32, d time.Duration) (time.Duration, error) {
	sh, err := e.groupShard(ref)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, errorf(felix.CodeInvalidRequest, "extend_ms must be positive")
	}
	d = min(d, e.cfg.Groups.MaxVisibility)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, c, err := sh.claimLocked(ref, off, attempts, true)
	if err != nil {
		return 0, err
	}
	c.until = e.cfg.Now().Add(d)
	return d, nil
}

// GroupDeadLetter sets a claimed record aside at once.
func (e *Engine) GroupDeadLetter(ref GroupRef, off uint64) error {
	sh, err := e.groupShard(ref)
	if err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, _, err := sh.claimLocked(ref, off, 0, false)
	if err != nil {
		return err
	}
	delete(g.claims, off)
	sh.deadLetterLocked(g, off)
	return nil
}

// GroupDeadLetters lists the group's dead letters, lowest offset first
// (empty for an unknown group).
func (e *Engine) GroupDeadLetters(ref GroupRef) ([]uint64, error) {
	sh, err := e.groupShard(ref)
	if err != nil {
		return nil, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, _ := sh.groupLocked(ref.Group, false)
	if g == nil {
		return []uint64{}, nil
	}
	sh.expireLocked(g, e.cfg.Now())
	return append([]uint64{}, g.dead...), nil
}

// deadLocked removes off from the dead letters; invalid_request when it is
// not one.
func (sh *shard) deadLocked(ref GroupRef, off uint64) (*group, error) {
	g, _ := sh.groupLocked(ref.Group, false)
	if g != nil {
		sh.expireLocked(g, sh.st.e.cfg.Now())
		if i, found := slices.BinarySearch(g.dead, off); found {
			g.dead = slices.Delete(g.dead, i, i+1)
			return g, nil
		}
	}
	return nil, errorf(felix.CodeInvalidRequest, "offset "+strconv.FormatUint(off, 10)+" is not a dead letter of group "+ref.Group)
}

// GroupRedrive puts a dead letter back in the queue with its attempt count
// reset: its next delivery has attempts 1.
func (e *Engine) GroupRedrive(ref GroupRef, off uint64) error {
	sh, err := e.groupShard(ref)
	if err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, err := sh.deadLocked(ref, off)
	if err != nil {
		return err
	}
	if _, had := g.claims[off]; had { // the dead letter's place passes to the claim
		e.claims.give(ref.Tenant, 1)
	}
	g.claims[off] = &claim{owed: true, notBefore: e.cfg.Now()}
	sh.signalLocked()
	return nil
}

// GroupDiscard drops a dead letter for good.
func (e *Engine) GroupDiscard(ref GroupRef, off uint64) error {
	sh, err := e.groupShard(ref)
	if err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, err = sh.deadLocked(ref, off); err != nil {
		return err
	}
	e.claims.give(ref.Tenant, 1)
	return nil
}

// GroupSeek moves the group's cursor to start (creating the group). Claims
// and owed records are forgotten; dead letters are kept. With ifNew an
// existing group is left alone (moved false). An offset outside the
// retained range is invalid_request. It returns the group's next offset.
func (e *Engine) GroupSeek(ref GroupRef, start felix.StartPosition, ifNew bool) (uint64, bool, error) {
	sh, err := e.groupShard(ref)
	if err != nil {
		return 0, false, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, _ := sh.groupLocked(ref.Group, false)
	if g != nil && ifNew {
		return g.next, false, nil
	}
	var to uint64
	switch start.Kind {
	case felix.StartEarliest:
		to = sh.base
	case felix.StartLatest:
		to = sh.next
	default:
		to = start.Offset
		if to < sh.base || to > sh.next {
			return 0, false, errorf(felix.CodeInvalidRequest, "offset "+strconv.FormatUint(to, 10)+" is outside the seekable range ["+
				strconv.FormatUint(sh.base, 10)+", "+strconv.FormatUint(sh.next, 10)+"]")
		}
	}
	if g == nil {
		if g, err = sh.groupLocked(ref.Group, true); err != nil {
			return 0, false, err
		}
	}
	g.next = to
	e.claims.give(ref.Tenant, int64(len(g.claims)))
	g.claims, g.peak = make(map[uint64]*claim), 0
	return to, true, nil
}

// GroupDescribe reports a group's position and counts.
func (e *Engine) GroupDescribe(ref GroupRef) (GroupInfo, error) {
	sh, err := e.groupShard(ref)
	if err != nil {
		return GroupInfo{}, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	info := GroupInfo{Tail: sh.next}
	g, _ := sh.groupLocked(ref.Group, false)
	if g == nil {
		return info, nil
	}
	sh.expireLocked(g, e.cfg.Now())
	info.HasCommitted, info.Committed = true, max(g.next, sh.base)
	for off, c := range g.claims {
		info.Committed = min(info.Committed, off)
		if c.owed {
			info.Owed++
		} else {
			info.InFlight++
		}
	}
	if sh.next > g.next {
		info.Owed += sh.next - max(g.next, sh.base)
	}
	info.DeadLetters = uint64(len(g.dead))
	return info, nil
}

// GroupDelete forgets a group; existed says whether there was one.
func (e *Engine) GroupDelete(ref GroupRef) (bool, error) {
	sh, err := e.groupShard(ref)
	if err != nil {
		return false, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g, existed := sh.groups[ref.Group]
	if existed {
		e.claims.give(ref.Tenant, int64(len(g.claims)+len(g.dead)))
		e.groupCount.give(ref.Tenant, 1)
		delete(sh.groups, ref.Group)
	}
	return existed, nil
}
