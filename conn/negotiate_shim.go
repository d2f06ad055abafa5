package conn

import "github.com/flxproto/felix"

// TEMPORARY until negotiate_msg.go lands.

func offerAuth(o felix.ClientOffer) *felix.Auth {
	a := &felix.Auth{TenantID: o.TenantID, Token: o.Token}
	if o.Legacy {
		return a
	}
	a.ClientFlags = felix.Some(uint16(o.Flags))
	lo, hi, sendHi := o.Features.WireWords()
	if lo != 0 || sendHi {
		a.ClientFeatures = felix.Some(lo)
	}
	if sendHi {
		a.ClientFeaturesHi = felix.Some(hi)
	}
	return a
}

func capsFromAnswer(m felix.Message) (felix.Capabilities, error) {
	switch a := m.(type) {
	case *felix.OK:
		return felix.LegacyCapabilities(), nil
	case *felix.AuthOK:
		var hi *uint32
		if a.ServerFeaturesHi.Set {
			hi = &a.ServerFeaturesHi.V
		}
		c := felix.Capabilities{Flags: felix.Flags(a.ServerFlags), Features: felix.FeaturesFromWire(a.ServerFeatures.V, hi), ListenerPorts: a.ListenerPorts.V}
		if c.Features.Has(felix.FeaturePublishPipeline) {
			c.PublishWindow = a.PublishWindow.V
		}
		return c, nil
	}
	return felix.Capabilities{}, protocolErr("answer %q to auth", m.MessageType())
}

func brokerAnswer(b felix.BrokerOffer, a *felix.Auth) (felix.Message, felix.PeerCapabilities) {
	var hi *uint32
	if a.ClientFeaturesHi.Set {
		hi = &a.ClientFeaturesHi.V
	}
	peer := felix.PeerCapabilities{Flags: felix.OriginalV1Flags, Features: felix.FeaturesFromWire(a.ClientFeatures.V, hi)}
	if !a.ClientFlags.Set {
		peer.Legacy = true
		return &felix.OK{}, peer
	}
	peer.Flags = felix.Flags(a.ClientFlags.V)
	adv := b.Features
	if b.PublishWindow == 0 {
		adv &^= felix.FeaturePublishPipeline | felix.FeatureStreamPublishWindow
	}
	lo, whi, sendHi := adv.AnswerWords(a.ClientFeatures.V)
	ok := &felix.AuthOK{ServerFlags: uint16(b.Flags)}
	if lo != 0 {
		ok.ServerFeatures = felix.Some(lo)
	}
	if sendHi {
		ok.ServerFeaturesHi = felix.Some(whi)
	}
	if len(b.ListenerPorts) > 1 {
		ok.ListenerPorts = felix.Some(b.ListenerPorts)
	}
	if b.PublishWindow > 0 && peer.Features.Has(felix.FeaturePublishPipeline) {
		ok.PublishWindow = felix.Some(b.PublishWindow)
	}
	return ok, peer
}
