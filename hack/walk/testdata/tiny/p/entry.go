package p

// Entry calls first (here), second (in other.go), then third (here).
func Entry() {
	first()
	second()
	third()
}

func first() {}

func third() { second() }
