"""WebShop as `rspo/WebShop-v0`: an offline re-implementation of princeton-nlp/WebShop's shop, goals and reward."""
