"""The one enforcement point of every served surface (``access``), the credentials each transport presents
(``credentials``), TLS on the listeners with certificate reload (``tls``) and the secure-by-default start
(``exposure``)."""
