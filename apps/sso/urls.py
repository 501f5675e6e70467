from django.urls import path

from . import views

# The names mozilla-django-oidc reverses (OIDC_AUTHENTICATION_CALLBACK_URL).
urlpatterns = [
    path("start/", views.SsoStartView.as_view(), name="oidc_authentication_init"),
    path("callback/", views.SsoCallbackView.as_view(), name="oidc_authentication_callback"),
]
