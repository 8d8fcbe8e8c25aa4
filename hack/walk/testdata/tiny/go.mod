module tiny

go 1.26.0
