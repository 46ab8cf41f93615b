module github.com/punctual/punctual/clients/go

go 1.19
