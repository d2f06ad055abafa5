package conn
