package felix

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func encodeJSON(t testing.TB, m Message) string {
	t.Helper()
	b, err := AppendMessage(nil, m)
	require.NoError(t, err)
	return string(b)
}

// roundTrip sends m through the JSON codec, as it would travel on a stream.
func roundTrip(t testing.TB, m Message) Message {
	t.Helper()
	out, err := DecodeMessage([]byte(encodeJSON(t, m)))
	require.NoError(t, err)
	return out
}

func TestClientOfferAuthBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		offer ClientOffer
		want  string
	}{
		{"flags only", ClientOffer{TenantID: "t1", Token: "...", Flags: 25},
			`{"type":"auth","tenant_id":"t1","token":"...","client_flags":25}`},
		{"flags and features", ClientOffer{TenantID: "t1", Token: "...", Flags: 63, Features: FeatureTopology | FeatureRedirect},
			`{"type":"auth","tenant_id":"t1","token":"...","client_flags":63,"client_features":3}`},
		{"extended word", ClientOffer{TenantID: "t1", Token: "...", Flags: 25, Features: FeatureTopology | FeatureInspect},
			`{"type":"auth","tenant_id":"t1","token":"...","client_flags":25,"client_features":2147483649,"client_features_hi":1}`},
		{"legacy", ClientOffer{TenantID: "t1", Token: "tok", Flags: 25, Features: FeatureTopology, Legacy: true},
			`{"type":"auth","tenant_id":"t1","token":"tok"}`},
		{"zero flags still negotiates", ClientOffer{TenantID: "t1", Token: "tok"},
			`{"type":"auth","tenant_id":"t1","token":"tok","client_flags":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, encodeJSON(t, tc.offer.Auth()))
		})
	}
}

func TestBrokerAnswerBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broker BrokerOffer
		auth   string
		want   string
	}{
		{"flags only", BrokerOffer{Flags: 25},
			`{"type":"auth","tenant_id":"t1","token":"x","client_flags":25}`,
			`{"type":"auth_ok","server_flags":25}`},
		{"low features", BrokerOffer{Flags: 63, Features: FeatureTopology},
			`{"type":"auth","tenant_id":"t1","token":"x","client_flags":63,"client_features":3}`,
			`{"type":"auth_ok","server_flags":63,"server_features":1}`},
		{"high word to an extended client", BrokerOffer{Flags: 25, Features: FeatureTopology | FeatureInspect},
			`{"type":"auth","tenant_id":"t1","token":"x","client_flags":25,"client_features":2147483649,"client_features_hi":1}`,
			`{"type":"auth_ok","server_flags":25,"server_features":2147483649,"server_features_hi":1}`},
		{"no high word to a client without the marker", BrokerOffer{Flags: 25, Features: FeatureTopology | FeatureInspect},
			`{"type":"auth","tenant_id":"t1","token":"x","client_flags":25,"client_features":1}`,
			`{"type":"auth_ok","server_flags":25,"server_features":1}`},
		{"window only to a pipelining client", BrokerOffer{Flags: 2047, Features: 0x0002_FE24, PublishWindow: 256},
			`{"type":"auth","tenant_id":"t1","token":"x","client_flags":2047,"client_features":32768}`,
			`{"type":"auth_ok","server_flags":2047,"server_features":196132,"publish_window":256}`},
		{"no window to a client that did not offer pipelining", BrokerOffer{Flags: 2047, Features: 0x0002_FE24, PublishWindow: 256},
			`{"type":"auth","tenant_id":"t1","token":"x","client_flags":2047}`,
			`{"type":"auth_ok","server_flags":2047,"server_features":196132}`},
		{"window 0 hides pipelining bits", BrokerOffer{Flags: 2047, Features: 0x0002_FE24},
			`{"type":"auth","tenant_id":"t1","token":"x","client_flags":2047,"client_features":32768}`,
			`{"type":"auth_ok","server_flags":2047,"server_features":32292}`}, // 0x0002_FE24 without 0x8000 and 0x2_0000
		{"listener ports", BrokerOffer{Flags: 7, ListenerPorts: []uint16{7447, 7448}},
			`{"type":"auth","tenant_id":"t1","token":"x","client_flags":7}`,
			`{"type":"auth_ok","server_flags":7,"listener_ports":[7447,7448]}`},
		{"legacy client gets ok", BrokerOffer{Flags: KnownFlags, Features: AllFeatures, PublishWindow: 256},
			`{"type":"auth","tenant_id":"t1","token":"x","client_features":32768}`,
			`{"type":"ok"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMessage([]byte(tc.auth))
			require.NoError(t, err)
			ans, _ := tc.broker.Answer(m.(*Auth))
			assert.Equal(t, tc.want, encodeJSON(t, ans))
		})
	}
}

// TestCompatibilityTable covers the four rows of docs/negotiation.md §3's old/new
// compatibility table, end to end through the JSON codec.
func TestCompatibilityTable(t *testing.T) {
	newBroker := BrokerOffer{Flags: KnownFlags, Features: AllFeatures &^ (FeatureTopology | FeatureRedirect), PublishWindow: 256}
	newClient := ClientOffer{TenantID: "t1", Token: "tok", Flags: DefaultClientFlags(), Features: DefaultClientFeatures()}
	legacyClient := ClientOffer{TenantID: "t1", Token: "tok", Legacy: true}
	// A legacy broker ignores unknown JSON fields and always answers ok.
	legacyBroker := func(*Auth) Message { return &OK{} }

	t.Run("negotiating client, negotiating broker", func(t *testing.T) {
		auth := roundTrip(t, newClient.Auth()).(*Auth)
		ans, peer := newBroker.Answer(auth)
		require.IsType(t, &AuthOK{}, ans)
		caps, err := CapabilitiesFromAnswer(roundTrip(t, ans))
		require.NoError(t, err)
		assert.Equal(t, KnownFlags, caps.Flags)
		assert.Equal(t, newBroker.Features, caps.Features, "both words advertised, marker removed")
		assert.Equal(t, uint32(256), caps.PublishWindow)
		assert.False(t, caps.Legacy)
		f, enc := caps.PublishFlags(true, true, false)
		assert.Equal(t, PublishBinary, enc)
		assert.Equal(t, Flags(0x0049), f)
		assert.Equal(t, DefaultClientFlags(), peer.Flags)
		assert.Equal(t, DefaultClientFeatures(), peer.Features)
		assert.True(t, peer.ErrorCodes())
	})
	t.Run("negotiating client, legacy broker", func(t *testing.T) {
		auth := roundTrip(t, newClient.Auth()).(*Auth)
		caps, err := CapabilitiesFromAnswer(roundTrip(t, legacyBroker(auth)))
		require.NoError(t, err)
		assert.Equal(t, OriginalV1Flags, caps.Flags)
		assert.Zero(t, caps.Features)
		assert.Zero(t, caps.PublishWindow)
		assert.True(t, caps.Legacy)
		for _, c := range []struct{ acked, keyed bool }{{true, false}, {false, true}, {true, true}} {
			_, enc := caps.PublishFlags(c.acked, c.keyed, false)
			assert.Equal(t, PublishJSON, enc, "acked/keyed publishes fall back to JSON")
		}
		f, enc := caps.PublishFlags(false, false, false)
		assert.Equal(t, PublishBinary, enc)
		assert.Equal(t, FlagBinaryPublishBatch, f)
		assert.False(t, caps.CanRequest("cache_delete"))
	})
	t.Run("legacy client, negotiating broker", func(t *testing.T) {
		auth := roundTrip(t, legacyClient.Auth()).(*Auth)
		ans, peer := newBroker.Answer(auth)
		assert.Equal(t, `{"type":"ok"}`, encodeJSON(t, ans))
		assert.True(t, peer.Legacy)
		assert.Equal(t, OriginalV1Flags, peer.Flags)
		assert.Zero(t, peer.Features)
		assert.Zero(t, peer.EventFlags(), "no modifier bits on frames to an old client")
		assert.Zero(t, peer.AckFlags())
		assert.False(t, peer.ErrorCodes())
		assert.False(t, peer.SubscriptionLagged())
	})
	t.Run("legacy client, legacy broker", func(t *testing.T) {
		auth := roundTrip(t, legacyClient.Auth()).(*Auth)
		assert.Equal(t, `{"type":"auth","tenant_id":"t1","token":"tok"}`, encodeJSON(t, auth))
		caps, err := CapabilitiesFromAnswer(legacyBroker(auth))
		require.NoError(t, err)
		assert.Equal(t, LegacyCapabilities(), caps)
	})
}

func TestCapabilitiesFromAnswer(t *testing.T) {
	decode := func(s string) Message {
		m, err := DecodeMessage([]byte(s))
		require.NoError(t, err)
		return m
	}
	c, err := CapabilitiesFromAnswer(decode(`{"type":"auth_ok","server_flags":25,"server_features_hi":1}`))
	require.NoError(t, err)
	assert.Zero(t, c.Features, "hi word without the marker is ignored")

	c, err = CapabilitiesFromAnswer(decode(`{"type":"auth_ok","server_flags":25,"server_features":2147483648}`))
	require.NoError(t, err)
	assert.Zero(t, c.Features, "marker without hi word reads as 0")

	c, err = CapabilitiesFromAnswer(decode(`{"type":"auth_ok","server_flags":25,"publish_window":256}`))
	require.NoError(t, err)
	assert.Zero(t, c.PublishWindow, "window without PUBLISH_PIPELINE is no window")

	c, err = CapabilitiesFromAnswer(decode(`{"type":"auth_ok","server_flags":25,"server_features":163840,"publish_window":64,"listener_ports":[1,2]}`))
	require.NoError(t, err)
	assert.Equal(t, uint32(64), c.PublishWindow)
	assert.True(t, c.PerStreamWindow())
	assert.Equal(t, []uint16{1, 2}, c.ListenerPorts)

	_, err = CapabilitiesFromAnswer(decode(`{"type":"error","message":"bad token","code":"unauthenticated"}`))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrAuthRefused))
	var ae *AuthError
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, "bad token", ae.Answer.Message)
	assert.Contains(t, err.Error(), "unauthenticated")

	_, err = CapabilitiesFromAnswer(decode(`{"type":"subscribed","subscription_id":1}`))
	assert.ErrorIs(t, err, ErrInvalidValue)
	_, err = CapabilitiesFromAnswer(nil)
	assert.ErrorIs(t, err, ErrInvalidValue)
}

// TestNegotiationProperty: whatever the two sides offer, the client's view
// of the answer never exceeds the broker's own set, the high word travels
// only when both sides have it, and the window only to a pipelining client.
func TestNegotiationProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := BrokerOffer{
			Flags:         Flags(rapid.Uint16().Draw(t, "bflags")) & KnownFlags,
			Features:      Features(rapid.Uint64().Draw(t, "bfeat")) & AllFeatures,
			PublishWindow: rapid.Uint32Range(0, 1024).Draw(t, "window"),
		}
		o := ClientOffer{
			TenantID: "t", Token: "k",
			Flags:    Flags(rapid.Uint16().Draw(t, "cflags")) & KnownFlags,
			Features: Features(rapid.Uint64().Draw(t, "cfeat")) & AllFeatures,
			Legacy:   rapid.Bool().Draw(t, "legacy"),
		}
		auth, err := DecodeMessage(o.Auth().AppendJSON(nil))
		if err != nil {
			t.Fatal(err)
		}
		ans, peer := b.Answer(auth.(*Auth))
		if o.Legacy {
			if _, ok := ans.(*OK); !ok || !peer.Legacy || peer.Flags != OriginalV1Flags || peer.Features != 0 {
				t.Fatalf("legacy client: %#v %#v", ans, peer)
			}
			return
		}
		if peer.Flags != o.Flags || peer.Features != o.Features {
			t.Fatalf("peer %v/%v != offer %v/%v", peer.Flags, peer.Features, o.Flags, o.Features)
		}
		decoded, err := DecodeMessage(ans.AppendJSON(nil))
		if err != nil {
			t.Fatal(err)
		}
		c, err := CapabilitiesFromAnswer(decoded)
		if err != nil {
			t.Fatal(err)
		}
		if c.Flags != b.Flags {
			t.Fatalf("flags %v != broker %v", c.Flags, b.Flags)
		}
		if c.Features&^b.Features != 0 {
			t.Fatalf("client sees %v beyond broker %v", c.Features, b.Features)
		}
		wantHi := o.Features.Hi() != 0 && b.Features.Hi() != 0
		if (c.Features.Hi() != 0) != wantHi || c.Features.Hi() != 0 && c.Features.Hi() != b.Features.Hi() {
			t.Fatalf("hi word %x (client hi %x, broker hi %x)", c.Features.Hi(), o.Features.Hi(), b.Features.Hi())
		}
		if c.Features.Lo() != b.advertised().Lo() {
			t.Fatalf("low word %x != advertised %x", c.Features.Lo(), b.advertised().Lo())
		}
		wantWindow := uint32(0)
		if b.PublishWindow > 0 && o.Features.Has(FeaturePublishPipeline) && b.Features.Has(FeaturePublishPipeline) {
			wantWindow = b.PublishWindow
		}
		if c.PublishWindow != wantWindow {
			t.Fatalf("window %d, want %d", c.PublishWindow, wantWindow)
		}
	})
}
