package p

type T struct{}

func (T) m() {}

func second() { T{}.m() }
