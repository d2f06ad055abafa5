package conformance_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
)

// The suite's runners of the queue.*, commit.*, publish_if.* and
// sharded.reports_the_shard_count scenarios (features_scenarios_test.go):
// one test per scenario id, against the fixture cluster, recorded like
// every other scenario. A scenario body's errSkip is recorded as a skip
// with its reason; any other error fails the scenario.

// fixtureEnv is the scenario environment of the suite's fixture: the
// cluster-aware client seeded with every broker (fx.scClient), and the
// building block dialled to the first broker for what only the wire
// shows.
func fixtureEnv(fx *Fx) *scenarioEnv {
	return &scenarioEnv{
		fx: fx.Fixture,
		client: func(t testing.TB, adjust func(*client.Config)) *client.Client {
			c, _ := fx.scClient(fx.Addrs, adjust)
			return c
		},
		dial: func(t testing.TB, adjust func(*conn.Config)) (*conn.Client, error) {
			return fx.dial(fx.Addrs[0], adjust), nil
		},
	}
}

// runScenario runs the scenario body named id against the fixture and
// records its evidence.
func runScenario(t *testing.T, id string) {
	var body func(context.Context, testing.TB, *scenarioEnv) (conformance.Evidence, error)
	for _, sc := range featureScenarios {
		if sc.id == id {
			body = sc.run
		}
	}
	if body == nil {
		t.Fatalf("no scenario body for %s", id)
	}
	run(t, id, func(t *testing.T, fx *Fx) {
		ev, err := body(fx.ctx(), t, fixtureEnv(fx))
		switch {
		case errors.Is(err, errSkip):
			fx.Skip(strings.TrimPrefix(err.Error(), errSkip.Error()+": "))
		case err != nil:
			t.Fatal(err)
		}
		fx.Pass(ev)
	})
}

// TestFeatureScenarioRunners checks that every feature scenario body has a
// runner below and names a catalogue scenario.
func TestFeatureScenarioRunners(t *testing.T) {
	for _, sc := range featureScenarios {
		if _, ok := conformance.Lookup(sc.id); !ok {
			t.Errorf("%s is not a catalogue id", sc.id)
		}
		if pending[sc.id] != "" {
			t.Errorf("%s has a runner and a pending entry", sc.id)
		}
	}
}

func Test_queue_poll_returns_claimed_records(t *testing.T) {
	runScenario(t, "queue.poll_returns_claimed_records")
}

func Test_queue_acknowledged_records_are_not_redelivered(t *testing.T) {
	runScenario(t, "queue.acknowledged_records_are_not_redelivered")
}

func Test_queue_unacknowledged_records_are_redelivered(t *testing.T) {
	runScenario(t, "queue.unacknowledged_records_are_redelivered")
}

func Test_queue_dead_letters_are_listable_and_redrivable(t *testing.T) {
	runScenario(t, "queue.dead_letters_are_listable_and_redrivable")
}

func Test_commit_returns_the_offset(t *testing.T) {
	runScenario(t, "commit.returns_the_offset")
}

func Test_commit_state_get_returns_the_version(t *testing.T) {
	runScenario(t, "commit.state_get_returns_the_version")
}

func Test_commit_expected_offset_refuses_a_stale_write(t *testing.T) {
	runScenario(t, "commit.expected_offset_refuses_a_stale_write")
}

func Test_commit_another_stream_is_refused(t *testing.T) {
	runScenario(t, "commit.another_stream_is_refused")
}

func Test_commit_exactly_one_event(t *testing.T) {
	runScenario(t, "commit.exactly_one_event")
}

func Test_commit_negotiated(t *testing.T) {
	runScenario(t, "commit.negotiated")
}

func Test_publish_if_lands_at_the_expected_offset(t *testing.T) {
	runScenario(t, "publish_if.lands_at_the_expected_offset")
}

func Test_publish_if_refused_with_the_tail(t *testing.T) {
	runScenario(t, "publish_if.refused_with_the_tail")
}

func Test_sharded_reports_the_shard_count(t *testing.T) {
	runScenario(t, "sharded.reports_the_shard_count")
}
