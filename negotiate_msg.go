package felix

import (
	"errors"
	"fmt"
	"slices"
)

// Auth builds the auth message for the offer. A legacy offer carries only
// tenant_id and token. Otherwise client_flags is always sent (its presence is
// what makes the broker answer auth_ok), client_features only when non-zero,
// and client_features_hi (with FeatureExtended in client_features) only when
// the offer has a high-word bit.
func (o ClientOffer) Auth() *Auth {
	a := &Auth{TenantID: o.TenantID, Token: o.Token}
	if o.Legacy {
		return a
	}
	a.ClientFlags = Some(uint16(o.Flags))
	lo, hi, sendHi := o.Features.WireWords()
	if lo != 0 {
		a.ClientFeatures = Some(lo)
	}
	if sendHi {
		a.ClientFeaturesHi = Some(hi)
	}
	return a
}

// ErrAuthRefused is matched (errors.Is) by the error CapabilitiesFromAnswer
// returns when the broker answered auth with an error message.
var ErrAuthRefused = errors.New("felix: authentication refused")

// AuthError is the broker's refusal of an auth, carrying its error message.
type AuthError struct {
	// Answer is the broker's error message.
	Answer *ErrorMessage
}

// Error formats the refusal with its code when present.
func (e *AuthError) Error() string {
	if c, ok := e.Answer.Code.Get(); ok {
		return fmt.Sprintf("felix: authentication refused: %s (%s)", e.Answer.Message, c)
	}
	return "felix: authentication refused: " + e.Answer.Message
}

// Is makes errors.Is(err, ErrAuthRefused) true.
func (e *AuthError) Is(target error) bool { return target == ErrAuthRefused }

// CapabilitiesFromAnswer reads the broker's answer to auth into what the
// client may use:
//   - auth_ok: server_flags and server_features exactly as advertised
//     (missing server_features = 0; server_features_hi trusted only with
//     FeatureExtended), publish_window only when FeaturePublishPipeline is
//     advertised too, listener_ports;
//   - ok (legacy broker): LegacyCapabilities;
//   - error: an *AuthError (errors.Is ErrAuthRefused);
//   - anything else: an ErrInvalidValue error.
func CapabilitiesFromAnswer(m Message) (Capabilities, error) {
	switch a := m.(type) {
	case *AuthOK:
		var hi *uint32
		if v, ok := a.ServerFeaturesHi.Get(); ok {
			hi = &v
		}
		c := Capabilities{
			Flags:    Flags(a.ServerFlags),
			Features: FeaturesFromWire(a.ServerFeatures.Or(0), hi),
		}
		if c.Features.Has(FeaturePublishPipeline) {
			c.PublishWindow = a.PublishWindow.Or(0)
		}
		if ports, ok := a.ListenerPorts.Get(); ok {
			c.ListenerPorts = slices.Clone(ports)
		}
		return c, nil
	case *OK:
		return LegacyCapabilities(), nil
	case *ErrorMessage:
		return Capabilities{}, &AuthError{Answer: a}
	case nil:
		return Capabilities{}, &Error{Class: ErrInvalidValue, Layout: "json_message", Field: "type", Offset: -1, Detail: "no answer to auth"}
	default:
		return Capabilities{}, &Error{Class: ErrInvalidValue, Layout: "json_message", Field: "type", Offset: -1,
			Detail: "unexpected answer to auth: " + m.MessageType()}
	}
}

// PeerFromAuth reads what a client offered in auth: client_flags
// (absent = legacy, OriginalV1Flags) and its features (absent = none; the
// high word by the extended-word rules).
func PeerFromAuth(a *Auth) PeerCapabilities {
	var hi *uint32
	if v, ok := a.ClientFeaturesHi.Get(); ok {
		hi = &v
	}
	p := PeerCapabilities{Features: FeaturesFromWire(a.ClientFeatures.Or(0), hi)}
	if f, ok := a.ClientFlags.Get(); ok {
		p.Flags = Flags(f)
	} else {
		p.Flags = OriginalV1Flags
		p.Legacy = true
	}
	return p
}

// Answer builds the broker's answer to an accepted auth and returns what the
// client offered. A client that sent no client_flags is answered with a plain
// ok. Otherwise auth_ok carries the broker's own flag set; server_features
// when it advertises any feature; server_features_hi (with the
// FeatureExtended marker) only when the client set FeatureExtended and the
// broker serves a high-word feature; listener_ports when configured; and
// publish_window only when the client offered FeaturePublishPipeline and the
// window is non-zero.
func (b BrokerOffer) Answer(a *Auth) (Message, PeerCapabilities) {
	peer := PeerFromAuth(a)
	if peer.Legacy {
		return &OK{}, peer
	}
	ok := &AuthOK{ServerFlags: uint16(b.Flags)}
	lo, hi, sendHi := b.advertised().AnswerWords(a.ClientFeatures.Or(0))
	if lo != 0 {
		ok.ServerFeatures = Some(lo)
	}
	if sendHi {
		ok.ServerFeaturesHi = Some(hi)
	}
	if len(b.ListenerPorts) > 0 {
		ok.ListenerPorts = Some(slices.Clone(b.ListenerPorts))
	}
	if b.PublishWindow > 0 && peer.Features.Has(FeaturePublishPipeline) {
		ok.PublishWindow = Some(b.PublishWindow)
	}
	return ok, peer
}

// Capabilities returns what a client that negotiated with this broker may
// use, as the client computes it from the answer to auth (useful to brokers
// and tests that need the client's view).
func (b BrokerOffer) Capabilities(a *Auth) Capabilities {
	ans, _ := b.Answer(a)
	c, _ := CapabilitiesFromAnswer(ans)
	return c
}
