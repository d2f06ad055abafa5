package conformance_test

// pending gives the reason a scenario is recorded as a skip when no test
// of this run recorded it: the behaviours the clients do not
// have yet. A test added for an id takes precedence (the table then no
// longer applies to it); remove the entry with it.
var pending = map[string]string{}
