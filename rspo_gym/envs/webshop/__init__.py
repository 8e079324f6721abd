"""WebShop as `rspo/WebShop-v1` (and `rspo/WebShop-v0`, its easier first task set): an offline re-implementation of princeton-nlp/WebShop's shop, goals and reward."""
