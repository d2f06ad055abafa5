package conformance_test

// pending gives the reason a scenario is recorded as a skip when no test
// of this run recorded it: the behaviours today's conn.Client does not
// have yet. A test added for an id takes precedence (the table then no
// longer applies to it); remove the entry with it.
var pending = map[string]string{
	"reconnect.survives_broker_loss":                              "conn.Client dials one broker and does not reconnect; the cluster-aware client is not merged yet",
	"reconnect.discovers_brokers_from_one_seed":                   "conn.Client does not ask topology or keep a broker list yet",
	"reconnect.subscription_resumes_at_the_next_offset":           "conn.Client does not resubscribe after a lost connection yet",
	"redirect.follows_to_the_shard_owner":                         "conn.Client reports not_leader as *NotLeaderError and does not follow it yet",
	"redirect.carries_the_start_offset_through_every_hop":         "conn.Client does not follow redirects yet",
	"redirect.is_not_reported_as_a_failure":                       "conn.Client returns not_leader to the application (*NotLeaderError) today",
	"retry.terminal_failures_are_not_retried":                     "conn.Client has no retry layer yet: nothing to classify",
	"retry.ambiguous_outcomes_are_not_silently_retried":           "conn.Client has no retry layer yet: nothing to classify",
	"retry.idempotent_producers_re_send_ambiguous_outcomes":       "conn.Producer does not re-send after a lost ack yet",
	"retry.transport_failures_are_retried_against_another_broker": "conn.Client dials one broker and does not retry elsewhere yet",
	"ack.none_does_not_wait_for_the_broker":                       "not written yet (client work)",
	"ack.per_message_means_the_broker_accepted_it":                "not written yet (client work)",
	"ack.at_least_once_may_duplicate_and_says_so":                 "conn.Client has no re-sending publish",
	"ack.carries_the_offset":                                      "not written yet (client work)",
	"ack.duplicate_reports_the_original_offset":                   "conn.Producer cannot re-send a sequence yet",
	"ack.offset_negotiated":                                       "not written yet (client work)",
	"fault.publish_through_a_dropped_link":                        "conn.Client does not reconnect after a dead link yet",
	"fault.publish_through_a_reset_link":                          "conn.Client does not reconnect after a dead link yet",
	"fault.publish_through_a_stalled_link":                        "not written yet (client work)",
	"fault.subscription_through_a_dropped_link":                   "conn.Client does not resubscribe after a dead link yet",
	"fault.subscription_through_a_reset_link":                     "conn.Client does not resubscribe after a dead link yet",
	"fault.subscription_through_a_stalled_link":                   "not written yet (client work)",
	"fault.cache_through_a_reset_link":                            "conn.Client does not move cache calls to a new connection yet",
	"sharded.delivers_every_shard":                                "conn.Client has no sharded subscription yet",
	"sharded.resumes_per_shard":                                   "conn.Client has no sharded subscription yet",
	"sharded.a_lost_shard_is_surfaced":                            "conn.Client has no sharded subscription yet",
}
