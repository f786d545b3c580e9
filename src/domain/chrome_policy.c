#include "domain/chrome_policy.h"

#include <stdlib.h>
#include <string.h>

#include "domain/fields.h"

struct policy {
    const char *name;
    enum chrome_policy_type type;
};

/* Chromium policy names accepted in chrome_policy and the JSON type of each
 * value, as Chromium's policy definitions declare them (main -> boolean,
 * int / int-enum -> integer, string / string-enum -> string, list /
 * string-enum-list -> array of strings, dict -> object; list policies whose
 * items are dictionaries -> array of objects). Sorted by strcmp for bsearch;
 * the unit test checks the order. */
static const struct policy known[] = {
    {"AbusiveExperienceInterventionEnforce", CHROME_POLICY_BOOLEAN},
    {"AccessControlAllowMethodsInCORSPreflightSpecConformant", CHROME_POLICY_BOOLEAN},
    {"AdditionalDnsQueryTypesEnabled", CHROME_POLICY_BOOLEAN},
    {"AdsSettingForIntrusiveAdsSites", CHROME_POLICY_INTEGER},
    {"AllowCrossOriginAuthPrompt", CHROME_POLICY_BOOLEAN},
    {"AllowDeletingBrowserHistory", CHROME_POLICY_BOOLEAN},
    {"AllowDinosaurEasterEgg", CHROME_POLICY_BOOLEAN},
    {"AllowFileSelectionDialogs", CHROME_POLICY_BOOLEAN},
    {"AllowSystemNotifications", CHROME_POLICY_BOOLEAN},
    {"AllowedDomainsForApps", CHROME_POLICY_STRING},
    {"AlternateErrorPagesEnabled", CHROME_POLICY_BOOLEAN},
    {"AlwaysOpenPdfExternally", CHROME_POLICY_BOOLEAN},
    {"AmbientAuthenticationInPrivateModesEnabled", CHROME_POLICY_INTEGER},
    {"ApplicationLocaleValue", CHROME_POLICY_STRING},
    {"AudioCaptureAllowed", CHROME_POLICY_BOOLEAN},
    {"AudioCaptureAllowedUrls", CHROME_POLICY_LIST},
    {"AudioProcessHighPriorityEnabled", CHROME_POLICY_BOOLEAN},
    {"AudioSandboxEnabled", CHROME_POLICY_BOOLEAN},
    {"AuthNegotiateDelegateAllowlist", CHROME_POLICY_STRING},
    {"AuthSchemes", CHROME_POLICY_STRING},
    {"AuthServerAllowlist", CHROME_POLICY_STRING},
    {"AutoLaunchProtocolsFromOrigins", CHROME_POLICY_LIST_DICT},
    {"AutoOpenAllowedForURLs", CHROME_POLICY_LIST},
    {"AutoOpenFileTypes", CHROME_POLICY_LIST},
    {"AutoSelectCertificateForUrls", CHROME_POLICY_LIST},
    {"AutofillAddressEnabled", CHROME_POLICY_BOOLEAN},
    {"AutofillCreditCardEnabled", CHROME_POLICY_BOOLEAN},
    {"AutoplayAllowed", CHROME_POLICY_BOOLEAN},
    {"AutoplayAllowlist", CHROME_POLICY_LIST},
    {"BackgroundModeEnabled", CHROME_POLICY_BOOLEAN},
    {"BasicAuthOverHttpEnabled", CHROME_POLICY_BOOLEAN},
    {"BlockThirdPartyCookies", CHROME_POLICY_BOOLEAN},
    {"BookmarkBarEnabled", CHROME_POLICY_BOOLEAN},
    {"BrowserAddPersonEnabled", CHROME_POLICY_BOOLEAN},
    {"BrowserGuestModeEnabled", CHROME_POLICY_BOOLEAN},
    {"BrowserGuestModeEnforced", CHROME_POLICY_BOOLEAN},
    {"BrowserLabsEnabled", CHROME_POLICY_BOOLEAN},
    {"BrowserNetworkTimeQueriesEnabled", CHROME_POLICY_BOOLEAN},
    {"BrowserSignin", CHROME_POLICY_INTEGER},
    {"BrowserThemeColor", CHROME_POLICY_STRING},
    {"BrowsingDataLifetime", CHROME_POLICY_LIST_DICT},
    {"BuiltInDnsClientEnabled", CHROME_POLICY_BOOLEAN},
    {"CertificateTransparencyEnforcementDisabledForCas", CHROME_POLICY_LIST},
    {"CertificateTransparencyEnforcementDisabledForUrls", CHROME_POLICY_LIST},
    {"ChromeVariations", CHROME_POLICY_INTEGER},
    {"ClearBrowsingDataOnExitList", CHROME_POLICY_LIST},
    {"ClickToCallEnabled", CHROME_POLICY_BOOLEAN},
    {"ClipboardAllowedForUrls", CHROME_POLICY_LIST},
    {"ClipboardBlockedForUrls", CHROME_POLICY_LIST},
    {"CloudPrintProxyEnabled", CHROME_POLICY_BOOLEAN},
    {"CloudPrintSubmitEnabled", CHROME_POLICY_BOOLEAN},
    {"ComponentUpdatesEnabled", CHROME_POLICY_BOOLEAN},
    {"CookiesAllowedForUrls", CHROME_POLICY_LIST},
    {"CookiesBlockedForUrls", CHROME_POLICY_LIST},
    {"CookiesSessionOnlyForUrls", CHROME_POLICY_LIST},
    {"DefaultBrowserSettingEnabled", CHROME_POLICY_BOOLEAN},
    {"DefaultClipboardSetting", CHROME_POLICY_INTEGER},
    {"DefaultCookiesSetting", CHROME_POLICY_INTEGER},
    {"DefaultDownloadDirectory", CHROME_POLICY_STRING},
    {"DefaultFileSystemReadGuardSetting", CHROME_POLICY_INTEGER},
    {"DefaultFileSystemWriteGuardSetting", CHROME_POLICY_INTEGER},
    {"DefaultGeolocationSetting", CHROME_POLICY_INTEGER},
    {"DefaultImagesSetting", CHROME_POLICY_INTEGER},
    {"DefaultInsecureContentSetting", CHROME_POLICY_INTEGER},
    {"DefaultJavaScriptJitSetting", CHROME_POLICY_INTEGER},
    {"DefaultJavaScriptSetting", CHROME_POLICY_INTEGER},
    {"DefaultLocalFontsSetting", CHROME_POLICY_INTEGER},
    {"DefaultMediaStreamSetting", CHROME_POLICY_INTEGER},
    {"DefaultNotificationsSetting", CHROME_POLICY_INTEGER},
    {"DefaultPopupsSetting", CHROME_POLICY_INTEGER},
    {"DefaultPrinterSelection", CHROME_POLICY_STRING},
    {"DefaultSearchProviderAlternateURLs", CHROME_POLICY_LIST},
    {"DefaultSearchProviderContextMenuAccessAllowed", CHROME_POLICY_BOOLEAN},
    {"DefaultSearchProviderEnabled", CHROME_POLICY_BOOLEAN},
    {"DefaultSearchProviderEncodings", CHROME_POLICY_LIST},
    {"DefaultSearchProviderIconURL", CHROME_POLICY_STRING},
    {"DefaultSearchProviderImageURL", CHROME_POLICY_STRING},
    {"DefaultSearchProviderImageURLPostParams", CHROME_POLICY_STRING},
    {"DefaultSearchProviderKeyword", CHROME_POLICY_STRING},
    {"DefaultSearchProviderName", CHROME_POLICY_STRING},
    {"DefaultSearchProviderNewTabURL", CHROME_POLICY_STRING},
    {"DefaultSearchProviderSearchURL", CHROME_POLICY_STRING},
    {"DefaultSearchProviderSearchURLPostParams", CHROME_POLICY_STRING},
    {"DefaultSearchProviderSuggestURL", CHROME_POLICY_STRING},
    {"DefaultSearchProviderSuggestURLPostParams", CHROME_POLICY_STRING},
    {"DefaultSensorsSetting", CHROME_POLICY_INTEGER},
    {"DefaultSerialGuardSetting", CHROME_POLICY_INTEGER},
    {"DefaultThirdPartyStoragePartitioningSetting", CHROME_POLICY_INTEGER},
    {"DefaultWebBluetoothGuardSetting", CHROME_POLICY_INTEGER},
    {"DefaultWebHidGuardSetting", CHROME_POLICY_INTEGER},
    {"DefaultWebUsbGuardSetting", CHROME_POLICY_INTEGER},
    {"DefaultWindowManagementSetting", CHROME_POLICY_INTEGER},
    {"Disable3DAPIs", CHROME_POLICY_BOOLEAN},
    {"DisableAuthNegotiateCnameLookup", CHROME_POLICY_BOOLEAN},
    {"DisablePrintPreview", CHROME_POLICY_BOOLEAN},
    {"DisableSafeBrowsingProceedAnyway", CHROME_POLICY_BOOLEAN},
    {"DisableScreenshots", CHROME_POLICY_BOOLEAN},
    {"DiskCacheSize", CHROME_POLICY_INTEGER},
    {"DnsInterceptionChecksEnabled", CHROME_POLICY_BOOLEAN},
    {"DnsOverHttpsMode", CHROME_POLICY_STRING},
    {"DnsOverHttpsTemplates", CHROME_POLICY_STRING},
    {"DownloadBubbleEnabled", CHROME_POLICY_BOOLEAN},
    {"DownloadDirectory", CHROME_POLICY_STRING},
    {"DownloadRestrictions", CHROME_POLICY_INTEGER},
    {"EditBookmarksEnabled", CHROME_POLICY_BOOLEAN},
    {"EnableAuthNegotiatePort", CHROME_POLICY_BOOLEAN},
    {"EnableExperimentalPolicies", CHROME_POLICY_LIST},
    {"EnableMediaRouter", CHROME_POLICY_BOOLEAN},
    {"EnableOnlineRevocationChecks", CHROME_POLICY_BOOLEAN},
    {"EncryptedClientHelloEnabled", CHROME_POLICY_BOOLEAN},
    {"EnterpriseHardwarePlatformAPIEnabled", CHROME_POLICY_BOOLEAN},
    {"ExemptDomainFileTypePairsFromFileTypeDownloadWarnings", CHROME_POLICY_LIST_DICT},
    {"ExplicitlyAllowedNetworkPorts", CHROME_POLICY_LIST},
    {"FeedbackSurveysEnabled", CHROME_POLICY_BOOLEAN},
    {"FetchKeepaliveDurationSecondsOnShutdown", CHROME_POLICY_INTEGER},
    {"FileSystemReadAskForUrls", CHROME_POLICY_LIST},
    {"FileSystemReadBlockedForUrls", CHROME_POLICY_LIST},
    {"FileSystemWriteAskForUrls", CHROME_POLICY_LIST},
    {"FileSystemWriteBlockedForUrls", CHROME_POLICY_LIST},
    {"FirstPartySetsEnabled", CHROME_POLICY_BOOLEAN},
    {"FirstPartySetsOverrides", CHROME_POLICY_DICT},
    {"ForceBrowserSignin", CHROME_POLICY_BOOLEAN},
    {"ForceEphemeralProfiles", CHROME_POLICY_BOOLEAN},
    {"ForceGoogleSafeSearch", CHROME_POLICY_BOOLEAN},
    {"ForceYouTubeRestrict", CHROME_POLICY_INTEGER},
    {"ForcedLanguages", CHROME_POLICY_LIST},
    {"FullscreenAllowed", CHROME_POLICY_BOOLEAN},
    {"GetDisplayMediaSetSelectAllScreensAllowedForUrls", CHROME_POLICY_LIST},
    {"GloballyScopeHTTPAuthCacheEnabled", CHROME_POLICY_BOOLEAN},
    {"GoogleSearchSidePanelEnabled", CHROME_POLICY_BOOLEAN},
    {"HSTSPolicyBypassList", CHROME_POLICY_LIST},
    {"HardwareAccelerationModeEnabled", CHROME_POLICY_BOOLEAN},
    {"HideWebStoreIcon", CHROME_POLICY_BOOLEAN},
    {"HighEfficiencyModeEnabled", CHROME_POLICY_BOOLEAN},
    {"HistoryClustersVisible", CHROME_POLICY_BOOLEAN},
    {"HomepageIsNewTabPage", CHROME_POLICY_BOOLEAN},
    {"HomepageLocation", CHROME_POLICY_STRING},
    {"HttpsOnlyMode", CHROME_POLICY_STRING},
    {"HttpsUpgradesEnabled", CHROME_POLICY_BOOLEAN},
    {"ImagesAllowedForUrls", CHROME_POLICY_LIST},
    {"ImagesBlockedForUrls", CHROME_POLICY_LIST},
    {"ImportAutofillFormData", CHROME_POLICY_BOOLEAN},
    {"ImportBookmarks", CHROME_POLICY_BOOLEAN},
    {"ImportHistory", CHROME_POLICY_BOOLEAN},
    {"ImportHomepage", CHROME_POLICY_BOOLEAN},
    {"ImportSavedPasswords", CHROME_POLICY_BOOLEAN},
    {"ImportSearchEngine", CHROME_POLICY_BOOLEAN},
    {"IncognitoModeAvailability", CHROME_POLICY_INTEGER},
    {"InsecureContentAllowedForUrls", CHROME_POLICY_LIST},
    {"InsecureContentBlockedForUrls", CHROME_POLICY_LIST},
    {"InsecureFormsWarningsEnabled", CHROME_POLICY_BOOLEAN},
    {"IntensiveWakeUpThrottlingEnabled", CHROME_POLICY_BOOLEAN},
    {"IntranetRedirectBehavior", CHROME_POLICY_INTEGER},
    {"IsolateOrigins", CHROME_POLICY_STRING},
    {"JavaScriptAllowedForUrls", CHROME_POLICY_LIST},
    {"JavaScriptBlockedForUrls", CHROME_POLICY_LIST},
    {"JavaScriptJitAllowedForSites", CHROME_POLICY_LIST},
    {"JavaScriptJitBlockedForSites", CHROME_POLICY_LIST},
    {"LegacySameSiteCookieBehaviorEnabled", CHROME_POLICY_INTEGER},
    {"LegacySameSiteCookieBehaviorEnabledForDomainList", CHROME_POLICY_LIST},
    {"LensRegionSearchEnabled", CHROME_POLICY_BOOLEAN},
    {"LocalFontsAllowedForUrls", CHROME_POLICY_LIST},
    {"LocalFontsBlockedForUrls", CHROME_POLICY_LIST},
    {"LookalikeWarningAllowlistDomains", CHROME_POLICY_LIST},
    {"ManagedAccountsSigninRestriction", CHROME_POLICY_STRING},
    {"ManagedBookmarks", CHROME_POLICY_LIST_DICT},
    {"ManagedConfigurationPerOrigin", CHROME_POLICY_LIST_DICT},
    {"MaxInvalidationFetchDelay", CHROME_POLICY_INTEGER},
    {"MediaRecommendationsEnabled", CHROME_POLICY_BOOLEAN},
    {"MediaRouterCastAllowAllIPs", CHROME_POLICY_BOOLEAN},
    {"MetricsReportingEnabled", CHROME_POLICY_BOOLEAN},
    {"NTPCardsVisible", CHROME_POLICY_BOOLEAN},
    {"NTPCustomBackgroundEnabled", CHROME_POLICY_BOOLEAN},
    {"NetworkPredictionOptions", CHROME_POLICY_INTEGER},
    {"NewTabPageLocation", CHROME_POLICY_STRING},
    {"NotificationsAllowedForUrls", CHROME_POLICY_LIST},
    {"NotificationsBlockedForUrls", CHROME_POLICY_LIST},
    {"NtlmV2Enabled", CHROME_POLICY_BOOLEAN},
    {"OverrideSecurityRestrictionsOnInsecureOrigin", CHROME_POLICY_LIST},
    {"PasswordLeakDetectionEnabled", CHROME_POLICY_BOOLEAN},
    {"PasswordManagerEnabled", CHROME_POLICY_BOOLEAN},
    {"PasswordProtectionChangePasswordURL", CHROME_POLICY_STRING},
    {"PasswordProtectionLoginURLs", CHROME_POLICY_LIST},
    {"PasswordProtectionWarningTrigger", CHROME_POLICY_INTEGER},
    {"PaymentMethodQueryEnabled", CHROME_POLICY_BOOLEAN},
    {"PdfAnnotationsEnabled", CHROME_POLICY_BOOLEAN},
    {"PolicyAtomicGroupsEnabled", CHROME_POLICY_BOOLEAN},
    {"PolicyDictionaryMultipleSourceMergeList", CHROME_POLICY_LIST},
    {"PolicyListMultipleSourceMergeList", CHROME_POLICY_LIST},
    {"PolicyRefreshRate", CHROME_POLICY_INTEGER},
    {"PopupsAllowedForUrls", CHROME_POLICY_LIST},
    {"PopupsBlockedForUrls", CHROME_POLICY_LIST},
    {"PrintHeaderFooter", CHROME_POLICY_BOOLEAN},
    {"PrintPreviewUseSystemDefaultPrinter", CHROME_POLICY_BOOLEAN},
    {"PrintRasterizationMode", CHROME_POLICY_INTEGER},
    {"PrinterTypeDenyList", CHROME_POLICY_LIST},
    {"PrintingAllowedBackgroundGraphicsModes", CHROME_POLICY_STRING},
    {"PrintingBackgroundGraphicsDefault", CHROME_POLICY_STRING},
    {"PrintingEnabled", CHROME_POLICY_BOOLEAN},
    {"PrintingPaperSizeDefault", CHROME_POLICY_DICT},
    {"PrivacySandboxAdMeasurementEnabled", CHROME_POLICY_BOOLEAN},
    {"PrivacySandboxAdTopicsEnabled", CHROME_POLICY_BOOLEAN},
    {"PrivacySandboxPromptEnabled", CHROME_POLICY_BOOLEAN},
    {"PrivacySandboxSiteEnabledAdsEnabled", CHROME_POLICY_BOOLEAN},
    {"ProfilePickerOnStartupAvailability", CHROME_POLICY_INTEGER},
    {"PromotionalTabsEnabled", CHROME_POLICY_BOOLEAN},
    {"PromptForDownloadLocation", CHROME_POLICY_BOOLEAN},
    {"PromptOnMultipleMatchingCertificates", CHROME_POLICY_BOOLEAN},
    {"QuicAllowed", CHROME_POLICY_BOOLEAN},
    {"RelaunchNotification", CHROME_POLICY_INTEGER},
    {"RelaunchNotificationPeriod", CHROME_POLICY_INTEGER},
    {"RequireOnlineRevocationChecksForLocalAnchors", CHROME_POLICY_BOOLEAN},
    {"RestoreOnStartup", CHROME_POLICY_INTEGER},
    {"RestoreOnStartupURLs", CHROME_POLICY_LIST},
    {"RoamingProfileSupportEnabled", CHROME_POLICY_BOOLEAN},
    {"SSLErrorOverrideAllowed", CHROME_POLICY_BOOLEAN},
    {"SSLErrorOverrideAllowedForOrigins", CHROME_POLICY_LIST},
    {"SSLVersionMin", CHROME_POLICY_STRING},
    {"SafeBrowsingAllowlistDomains", CHROME_POLICY_LIST},
    {"SafeBrowsingEnabled", CHROME_POLICY_BOOLEAN},
    {"SafeBrowsingExtendedReportingEnabled", CHROME_POLICY_BOOLEAN},
    {"SafeBrowsingForTrustedSourcesEnabled", CHROME_POLICY_BOOLEAN},
    {"SafeBrowsingProtectionLevel", CHROME_POLICY_INTEGER},
    {"SafeSitesFilterBehavior", CHROME_POLICY_INTEGER},
    {"SavingBrowserHistoryDisabled", CHROME_POLICY_BOOLEAN},
    {"ScreenCaptureAllowed", CHROME_POLICY_BOOLEAN},
    {"ScreenCaptureAllowedByOrigins", CHROME_POLICY_LIST},
    {"ScrollToTextFragmentEnabled", CHROME_POLICY_BOOLEAN},
    {"SearchSuggestEnabled", CHROME_POLICY_BOOLEAN},
    {"SecurityKeyPermitAttestation", CHROME_POLICY_LIST},
    {"SensorsAllowedForUrls", CHROME_POLICY_LIST},
    {"SensorsBlockedForUrls", CHROME_POLICY_LIST},
    {"SerialAskForUrls", CHROME_POLICY_LIST},
    {"SerialBlockedForUrls", CHROME_POLICY_LIST},
    {"SharedArrayBufferUnrestrictedAccessAllowed", CHROME_POLICY_BOOLEAN},
    {"SharedClipboardEnabled", CHROME_POLICY_BOOLEAN},
    {"ShoppingListEnabled", CHROME_POLICY_BOOLEAN},
    {"ShowAppsShortcutInBookmarkBar", CHROME_POLICY_BOOLEAN},
    {"ShowCastIconInToolbar", CHROME_POLICY_BOOLEAN},
    {"ShowFullUrlsInAddressBar", CHROME_POLICY_BOOLEAN},
    {"ShowHomeButton", CHROME_POLICY_BOOLEAN},
    {"SideSearchEnabled", CHROME_POLICY_BOOLEAN},
    {"SignedHTTPExchangeEnabled", CHROME_POLICY_BOOLEAN},
    {"SigninInterceptionEnabled", CHROME_POLICY_BOOLEAN},
    {"SitePerProcess", CHROME_POLICY_BOOLEAN},
    {"SpellCheckServiceEnabled", CHROME_POLICY_BOOLEAN},
    {"SpellcheckEnabled", CHROME_POLICY_BOOLEAN},
    {"SpellcheckLanguage", CHROME_POLICY_LIST},
    {"SpellcheckLanguageBlocklist", CHROME_POLICY_LIST},
    {"StrictMimetypeCheckForWorkerScriptsEnabled", CHROME_POLICY_BOOLEAN},
    {"SuppressDifferentOriginSubframeDialogs", CHROME_POLICY_BOOLEAN},
    {"SuppressUnsupportedOSWarning", CHROME_POLICY_BOOLEAN},
    {"SyncDisabled", CHROME_POLICY_BOOLEAN},
    {"SyncTypesListDisabled", CHROME_POLICY_LIST},
    {"TabCaptureAllowedByOrigins", CHROME_POLICY_LIST},
    {"TabFreezingEnabled", CHROME_POLICY_BOOLEAN},
    {"TaskManagerEndProcessEnabled", CHROME_POLICY_BOOLEAN},
    {"ThirdPartyStoragePartitioningBlockedForOrigins", CHROME_POLICY_LIST},
    {"TotalMemoryLimitMb", CHROME_POLICY_INTEGER},
    {"TranslateEnabled", CHROME_POLICY_BOOLEAN},
    {"URLAllowlist", CHROME_POLICY_LIST},
    {"URLBlacklist", CHROME_POLICY_LIST},
    {"URLBlocklist", CHROME_POLICY_LIST},
    {"URLWhitelist", CHROME_POLICY_LIST},
    {"UrlKeyedAnonymizedDataCollectionEnabled", CHROME_POLICY_BOOLEAN},
    {"UserAgentClientHintsGREASEUpdateEnabled", CHROME_POLICY_BOOLEAN},
    {"UserAgentReduction", CHROME_POLICY_INTEGER},
    {"UserFeedbackAllowed", CHROME_POLICY_BOOLEAN},
    {"VideoCaptureAllowed", CHROME_POLICY_BOOLEAN},
    {"VideoCaptureAllowedUrls", CHROME_POLICY_LIST},
    {"WebAppInstallForceList", CHROME_POLICY_LIST_DICT},
    {"WebAppSettings", CHROME_POLICY_LIST_DICT},
    {"WebHidAskForUrls", CHROME_POLICY_LIST},
    {"WebHidBlockedForUrls", CHROME_POLICY_LIST},
    {"WebRtcAllowLegacyTLSProtocols", CHROME_POLICY_BOOLEAN},
    {"WebRtcEventLogCollectionAllowed", CHROME_POLICY_BOOLEAN},
    {"WebRtcIPHandling", CHROME_POLICY_STRING},
    {"WebRtcLocalIpsAllowedUrls", CHROME_POLICY_LIST},
    {"WebRtcUdpPortRange", CHROME_POLICY_STRING},
    {"WebSQLAccess", CHROME_POLICY_BOOLEAN},
    {"WebUsbAllowDevicesForUrls", CHROME_POLICY_LIST_DICT},
    {"WebUsbAskForUrls", CHROME_POLICY_LIST},
    {"WebUsbBlockedForUrls", CHROME_POLICY_LIST},
    {"WindowCaptureAllowedByOrigins", CHROME_POLICY_LIST},
    {"WindowManagementAllowedForUrls", CHROME_POLICY_LIST},
    {"WindowManagementBlockedForUrls", CHROME_POLICY_LIST},
    {"WindowOcclusionEnabled", CHROME_POLICY_BOOLEAN},
    {"ZstdContentEncodingEnabled", CHROME_POLICY_BOOLEAN},
};

/* Policies the service sets itself: extension installation and settings
 * (extensions are configured through the extensions field), proxy settings
 * (egress is the service's), remote debugging, developer tools, WebDriver and
 * headless mode (the CDP relay and automation depend on them), and the
 * directories holding the browser's profile data. Sorted by strcmp. */
static const char *const managed[] = {
    "BlockExternalExtensions",
    "CommandLineFlagSecurityWarningsEnabled",
    "DeveloperToolsAvailability",
    "DeveloperToolsDisabled",
    "DiskCacheDir",
    "ExtensionAllowInsecureUpdates",
    "ExtensionAllowedTypes",
    "ExtensionDeveloperModeSettings",
    "ExtensionInstallAllowlist",
    "ExtensionInstallBlacklist",
    "ExtensionInstallBlocklist",
    "ExtensionInstallForcelist",
    "ExtensionInstallSources",
    "ExtensionInstallTypeBlocklist",
    "ExtensionInstallWhitelist",
    "ExtensionManifestV2Availability",
    "ExtensionSettings",
    "ExtensionUnpublishedAvailability",
    "HeadlessMode",
    "MaxConnectionsPerProxy",
    "NativeMessagingAllowlist",
    "NativeMessagingBlacklist",
    "NativeMessagingBlocklist",
    "NativeMessagingUserLevelHosts",
    "NativeMessagingWhitelist",
    "ProxyBypassList",
    "ProxyMode",
    "ProxyPacUrl",
    "ProxyServer",
    "ProxyServerMode",
    "ProxySettings",
    "RemoteDebuggingAllowed",
    "UserDataDir",
    "WPADQuickCheckEnabled",
    "WebDriverOverridesIncompatiblePolicies",
};

static int cmp_policy(const void *key, const void *elem)
{
    return strcmp(key, ((const struct policy *)elem)->name);
}

static int cmp_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

enum chrome_policy_type chrome_policy_type_of(const char *name)
{
    if (bsearch(name, managed, sizeof managed / sizeof managed[0], sizeof managed[0], cmp_name))
        return CHROME_POLICY_MANAGED;
    const struct policy *p =
        bsearch(name, known, sizeof known / sizeof known[0], sizeof known[0], cmp_policy);
    return p ? p->type : CHROME_POLICY_UNKNOWN;
}

const char *chrome_policy_name_at(size_t i, enum chrome_policy_type *type)
{
    size_t nknown = sizeof known / sizeof known[0];
    if (i < nknown) {
        *type = known[i].type;
        return known[i].name;
    }
    i -= nknown;
    if (i < sizeof managed / sizeof managed[0]) {
        *type = CHROME_POLICY_MANAGED;
        return managed[i];
    }
    return NULL;
}

/* Checks every item of an array policy: strings for LIST, objects for LIST_DICT. */
static int check_items(const char *path, const json_t *v, int want_dict, struct err *e)
{
    int rc = 0;
    size_t i;
    json_t *item;
    char p[FIELDS_PATH_MAX];
    json_array_foreach((json_t *)v, i, item)
    {
        if (want_dict ? json_is_object(item) : json_is_string(item))
            continue;
        rc = err_field(e, fields_path_index(p, sizeof p, path, i), "must be %s, not %s",
                       want_dict ? "an object" : "a string", fields_type_name(item));
    }
    return rc;
}

static int check_value(const char *path, enum chrome_policy_type t, const json_t *v, struct err *e)
{
    switch (t) {
    case CHROME_POLICY_BOOLEAN:
        return fields_check_bool(path, v, e);
    case CHROME_POLICY_INTEGER:
        if (!json_is_integer(v))
            return err_field(e, path, "must be an integer, not %s", fields_type_name(v));
        return 0;
    case CHROME_POLICY_STRING:
        if (!json_is_string(v))
            return err_field(e, path, "must be a string, not %s", fields_type_name(v));
        return 0;
    case CHROME_POLICY_LIST:
    case CHROME_POLICY_LIST_DICT:
        if (!json_is_array(v))
            return err_field(e, path, "must be an array of %s, not %s",
                             t == CHROME_POLICY_LIST ? "strings" : "objects", fields_type_name(v));
        return check_items(path, v, t == CHROME_POLICY_LIST_DICT, e);
    case CHROME_POLICY_DICT:
        if (!json_is_object(v))
            return err_field(e, path, "must be an object, not %s", fields_type_name(v));
        return 0;
    case CHROME_POLICY_MANAGED:
        return err_field(e, path, "is managed by the service and cannot be set");
    case CHROME_POLICY_UNKNOWN:
        break;
    }
    return err_field(e, path, "is not a known Chromium policy name");
}

int chrome_policy_validate(const char *path, const json_t *v, struct err *e)
{
    if (!json_is_object(v))
        return err_field(e, path, "must be an object of Chromium policy names to values, not %s",
                         fields_type_name(v));
    int rc = 0;
    size_t size = json_dumpb(v, NULL, 0, JSON_COMPACT);
    if (size == 0 && json_object_size(v) > 0)
        rc = err_field(e, path, "cannot be serialized");
    else if (size > CHROME_POLICY_MAX_BYTES)
        rc = err_field(e, path, "serialized size is %zu bytes; the cap is 5 MiB (%u bytes)", size,
                       CHROME_POLICY_MAX_BYTES);
    const char *key;
    json_t *val;
    char p[FIELDS_PATH_MAX];
    json_object_foreach((json_t *)v, key, val)
    {
        fields_path(p, sizeof p, path, key);
        if (check_value(p, chrome_policy_type_of(key), val, e) < 0)
            rc = E_INVALID;
    }
    return rc;
}
