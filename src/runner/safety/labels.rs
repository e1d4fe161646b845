//! The label table: words and phrases on controls and in dialogs, in the ten languages a
//! desktop most often shows (English, German, French, Spanish, Italian, Portuguese,
//! Russian, Chinese, Japanese, Korean), with the grant kind each one commits to.
//!
//! Three uses, one table ([`LABELS`]):
//! - [`Use::Control`]: a button, menu item or link with this name commits the act ("Delete",
//!   "Löschen", "Supprimer", "删除", "Place your order", "Revoke access").
//! - [`Use::Confirm`]: a generic answer ("OK", "Yes", "Continue", "Ja", "确定") that commits
//!   whatever the dialog around it says; judged with [`Use::Context`].
//! - [`Use::Context`]: a phrase in a dialog's text or title that says the act cannot be
//!   undone ("permanently", "cannot be undone", "endgültig", "définitivement", "已存在").
//!
//! Matching is on [`normalize`]d text (look-alike letters folded, case folded); Latin and
//! Cyrillic phrases match whole words, Chinese, Japanese and Korean ones anywhere in the text
//! (those scripts do not separate words with spaces).

use std::sync::OnceLock;

use super::grants::GrantKind;
use crate::text_norm::{normalize, words};

/// How a label is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// The name of a control that commits the act when pressed.
    Control,
    /// A generic confirming answer in a dialog.
    Confirm,
    /// A dialog text phrase saying the act is irreversible (or what it is).
    Context,
    /// The name of a trash or recycle bin (a drag onto it deletes).
    Trash,
}

/// One entry of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    /// ISO 639-1 language code.
    pub lang: &'static str,
    /// How it is used.
    pub usage: Use,
    /// The kind it commits to (for [`Use::Confirm`], the kind when no context says more).
    pub kind: GrantKind,
    /// The word or phrase.
    pub text: &'static str,
}

const fn l(lang: &'static str, usage: Use, kind: GrantKind, text: &'static str) -> Label {
    Label {
        lang,
        usage,
        kind,
        text,
    }
}

use GrantKind::{Close, Delete, Overwrite, Pay, Send, System};
use Use::{Confirm, Context, Control, Trash};

/// The languages of the table.
pub const LANGUAGES: [&str; 10] = ["en", "de", "fr", "es", "it", "pt", "ru", "zh", "ja", "ko"];

/// The table.
#[rustfmt::skip]
pub const LABELS: &[Label] = &[
    // ── English ──
    l("en", Control, Delete, "delete"), l("en", Control, Delete, "delete permanently"),
    l("en", Control, Delete, "permanently delete"), l("en", Control, Delete, "remove"),
    l("en", Control, Delete, "erase"), l("en", Control, Delete, "wipe"),
    l("en", Control, Delete, "shred"), l("en", Control, Delete, "destroy"),
    l("en", Control, Delete, "move to trash"), l("en", Control, Delete, "move to bin"),
    l("en", Control, Delete, "trash"), l("en", Control, Delete, "empty trash"),
    l("en", Control, Delete, "empty bin"), l("en", Control, Delete, "empty recycle bin"),
    l("en", Control, Delete, "clear history"), l("en", Control, Delete, "clear all data"),
    l("en", Control, Delete, "clear data"), l("en", Control, Delete, "delete account"),
    l("en", Control, Overwrite, "overwrite"), l("en", Control, Overwrite, "replace file"),
    l("en", Control, Close, "don't save"), l("en", Control, Close, "dont save"),
    l("en", Control, Close, "do not save"), l("en", Control, Close, "discard"),
    l("en", Control, Close, "discard changes"), l("en", Control, Close, "close without saving"),
    l("en", Control, Close, "quit without saving"), l("en", Control, Close, "quit anyway"),
    l("en", Control, Close, "close anyway"), l("en", Control, Close, "force quit"),
    l("en", Control, Close, "end task"),
    l("en", Control, Send, "send"), l("en", Control, Send, "send now"),
    l("en", Control, Send, "publish"), l("en", Control, Send, "post"),
    l("en", Control, Send, "send message"), l("en", Control, Send, "send email"),
    l("en", Control, Pay, "pay"), l("en", Control, Pay, "pay now"), l("en", Control, Pay, "buy"),
    l("en", Control, Pay, "buy now"), l("en", Control, Pay, "purchase"),
    l("en", Control, Pay, "complete purchase"), l("en", Control, Pay, "checkout"),
    l("en", Control, Pay, "check out"), l("en", Control, Pay, "place order"),
    l("en", Control, Pay, "place your order"), l("en", Control, Pay, "order now"),
    l("en", Control, Pay, "confirm order"), l("en", Control, Pay, "confirm purchase"),
    l("en", Control, Pay, "confirm payment"), l("en", Control, Pay, "submit payment"),
    l("en", Control, Pay, "submit order"), l("en", Control, Pay, "subscribe"),
    l("en", Control, Pay, "donate"), l("en", Control, Pay, "transfer"),
    l("en", Control, Pay, "send money"), l("en", Control, Pay, "book now"),
    l("en", Control, System, "factory reset"), l("en", Control, System, "reset to factory settings"),
    l("en", Control, System, "erase all content and settings"), l("en", Control, System, "format disk"),
    l("en", Control, System, "format drive"), l("en", Control, System, "format volume"),
    l("en", Control, System, "format partition"), l("en", Control, System, "uninstall"),
    l("en", Control, System, "revoke"), l("en", Control, System, "revoke access"),
    l("en", Control, System, "deactivate"), l("en", Control, System, "deactivate account"),
    l("en", Control, System, "close account"), l("en", Control, System, "cancel subscription"),
    l("en", Control, System, "cancel my subscription"), l("en", Control, System, "unsubscribe"),
    l("en", Control, System, "shut down"), l("en", Control, System, "restart now"),
    l("en", Confirm, Delete, "ok"), l("en", Confirm, Delete, "yes"),
    l("en", Confirm, Delete, "continue"), l("en", Confirm, Delete, "confirm"),
    l("en", Confirm, Delete, "proceed"), l("en", Confirm, Delete, "accept"),
    l("en", Confirm, Delete, "agree"), l("en", Confirm, Delete, "i agree"),
    l("en", Confirm, Overwrite, "replace"),
    l("en", Context, Delete, "permanently"), l("en", Context, Delete, "cannot be undone"),
    l("en", Context, Delete, "can't be undone"), l("en", Context, Delete, "can not be undone"),
    l("en", Context, Delete, "irreversible"), l("en", Context, Delete, "will be deleted"),
    l("en", Context, Delete, "cannot be recovered"), l("en", Context, Close, "will be lost"),
    l("en", Context, Close, "unsaved changes"), l("en", Context, Overwrite, "already exists"),
    l("en", Trash, Delete, "trash"), l("en", Trash, Delete, "bin"),
    l("en", Trash, Delete, "recycle bin"), l("en", Trash, Delete, "wastebasket"),
    // ── German ──
    l("de", Control, Delete, "löschen"), l("de", Control, Delete, "endgültig löschen"),
    l("de", Control, Delete, "entfernen"), l("de", Control, Delete, "in den papierkorb"),
    l("de", Control, Delete, "papierkorb leeren"), l("de", Control, Delete, "verlauf löschen"),
    l("de", Control, Overwrite, "überschreiben"),
    l("de", Control, Close, "nicht speichern"), l("de", Control, Close, "verwerfen"),
    l("de", Control, Close, "änderungen verwerfen"), l("de", Control, Close, "ohne speichern schließen"),
    l("de", Control, Send, "senden"), l("de", Control, Send, "absenden"),
    l("de", Control, Send, "abschicken"), l("de", Control, Send, "veröffentlichen"),
    l("de", Control, Pay, "bezahlen"), l("de", Control, Pay, "jetzt bezahlen"),
    l("de", Control, Pay, "kaufen"), l("de", Control, Pay, "jetzt kaufen"),
    l("de", Control, Pay, "bestellen"), l("de", Control, Pay, "kostenpflichtig bestellen"),
    l("de", Control, Pay, "zahlungspflichtig bestellen"), l("de", Control, Pay, "überweisen"),
    l("de", Control, Pay, "abonnieren"),
    l("de", Control, System, "auf werkseinstellungen zurücksetzen"),
    l("de", Control, System, "werkseinstellungen"), l("de", Control, System, "deinstallieren"),
    l("de", Control, System, "formatieren"), l("de", Control, System, "zugriff widerrufen"),
    l("de", Control, System, "widerrufen"), l("de", Control, System, "abonnement kündigen"),
    l("de", Control, System, "kündigen"), l("de", Control, System, "herunterfahren"),
    l("de", Confirm, Delete, "ja"), l("de", Confirm, Delete, "weiter"),
    l("de", Confirm, Delete, "fortfahren"), l("de", Confirm, Delete, "bestätigen"),
    l("de", Confirm, Overwrite, "ersetzen"),
    l("de", Context, Delete, "endgültig"), l("de", Context, Delete, "dauerhaft"),
    l("de", Context, Delete, "nicht rückgängig"), l("de", Context, Delete, "unwiderruflich"),
    l("de", Context, Close, "gehen verloren"), l("de", Context, Overwrite, "existiert bereits"),
    l("de", Context, Overwrite, "ist bereits vorhanden"),
    l("de", Trash, Delete, "papierkorb"),
    // ── French ──
    l("fr", Control, Delete, "supprimer"), l("fr", Control, Delete, "supprimer définitivement"),
    l("fr", Control, Delete, "effacer"), l("fr", Control, Delete, "mettre à la corbeille"),
    l("fr", Control, Delete, "vider la corbeille"), l("fr", Control, Delete, "retirer"),
    l("fr", Control, Overwrite, "écraser"),
    l("fr", Control, Close, "ne pas enregistrer"), l("fr", Control, Close, "ignorer les modifications"),
    l("fr", Control, Close, "fermer sans enregistrer"), l("fr", Control, Close, "abandonner"),
    l("fr", Control, Send, "envoyer"), l("fr", Control, Send, "publier"),
    l("fr", Control, Pay, "payer"), l("fr", Control, Pay, "acheter"),
    l("fr", Control, Pay, "commander"), l("fr", Control, Pay, "passer la commande"),
    l("fr", Control, Pay, "valider la commande"), l("fr", Control, Pay, "confirmer le paiement"),
    l("fr", Control, Pay, "effectuer le virement"), l("fr", Control, Pay, "s'abonner"),
    l("fr", Control, System, "réinitialiser les paramètres d'usine"),
    l("fr", Control, System, "rétablir la configuration d'usine"),
    l("fr", Control, System, "désinstaller"), l("fr", Control, System, "formater"),
    l("fr", Control, System, "révoquer l'accès"), l("fr", Control, System, "révoquer"),
    l("fr", Control, System, "résilier l'abonnement"), l("fr", Control, System, "annuler mon abonnement"),
    l("fr", Control, System, "annuler l'abonnement"), l("fr", Control, System, "éteindre"),
    l("fr", Confirm, Delete, "oui"), l("fr", Confirm, Delete, "continuer"),
    l("fr", Confirm, Delete, "confirmer"), l("fr", Confirm, Delete, "valider"),
    l("fr", Confirm, Delete, "accepter"), l("fr", Confirm, Overwrite, "remplacer"),
    l("fr", Context, Delete, "définitivement"), l("fr", Context, Delete, "irréversible"),
    l("fr", Context, Delete, "ne peut pas être annulée"), l("fr", Context, Delete, "impossible d'annuler"),
    l("fr", Context, Close, "seront perdues"), l("fr", Context, Overwrite, "existe déjà"),
    l("fr", Trash, Delete, "corbeille"),
    // ── Spanish ──
    l("es", Control, Delete, "eliminar"), l("es", Control, Delete, "borrar"),
    l("es", Control, Delete, "eliminar definitivamente"), l("es", Control, Delete, "mover a la papelera"),
    l("es", Control, Delete, "vaciar la papelera"), l("es", Control, Delete, "quitar"),
    l("es", Control, Overwrite, "sobrescribir"),
    l("es", Control, Close, "no guardar"), l("es", Control, Close, "descartar"),
    l("es", Control, Close, "descartar cambios"), l("es", Control, Close, "cerrar sin guardar"),
    l("es", Control, Send, "enviar"), l("es", Control, Send, "publicar"),
    l("es", Control, Pay, "pagar"), l("es", Control, Pay, "pagar ahora"),
    l("es", Control, Pay, "comprar"), l("es", Control, Pay, "comprar ahora"),
    l("es", Control, Pay, "realizar pedido"), l("es", Control, Pay, "hacer pedido"),
    l("es", Control, Pay, "confirmar pedido"), l("es", Control, Pay, "confirmar pago"),
    l("es", Control, Pay, "transferir"), l("es", Control, Pay, "suscribirse"),
    l("es", Control, System, "restablecer valores de fábrica"),
    l("es", Control, System, "restablecer de fábrica"), l("es", Control, System, "desinstalar"),
    l("es", Control, System, "formatear"), l("es", Control, System, "revocar acceso"),
    l("es", Control, System, "revocar"), l("es", Control, System, "cancelar suscripción"),
    l("es", Control, System, "cancelar mi suscripción"), l("es", Control, System, "apagar"),
    l("es", Confirm, Delete, "sí"), l("es", Confirm, Delete, "si"),
    l("es", Confirm, Delete, "continuar"), l("es", Confirm, Delete, "confirmar"),
    l("es", Confirm, Delete, "aceptar"), l("es", Confirm, Overwrite, "reemplazar"),
    l("es", Context, Delete, "permanentemente"), l("es", Context, Delete, "definitivamente"),
    l("es", Context, Delete, "no se puede deshacer"), l("es", Context, Delete, "irreversible"),
    l("es", Context, Close, "se perderán"), l("es", Context, Overwrite, "ya existe"),
    l("es", Trash, Delete, "papelera"),
    // ── Italian ──
    l("it", Control, Delete, "elimina"), l("it", Control, Delete, "eliminare"),
    l("it", Control, Delete, "cancella"), l("it", Control, Delete, "elimina definitivamente"),
    l("it", Control, Delete, "sposta nel cestino"), l("it", Control, Delete, "svuota il cestino"),
    l("it", Control, Delete, "rimuovi"), l("it", Control, Overwrite, "sovrascrivi"),
    l("it", Control, Close, "non salvare"), l("it", Control, Close, "scarta"),
    l("it", Control, Close, "scarta modifiche"), l("it", Control, Close, "chiudi senza salvare"),
    l("it", Control, Send, "invia"), l("it", Control, Send, "pubblica"),
    l("it", Control, Pay, "paga"), l("it", Control, Pay, "paga ora"),
    l("it", Control, Pay, "acquista"), l("it", Control, Pay, "compra"),
    l("it", Control, Pay, "ordina"), l("it", Control, Pay, "effettua l'ordine"),
    l("it", Control, Pay, "conferma ordine"), l("it", Control, Pay, "conferma pagamento"),
    l("it", Control, Pay, "abbonati"),
    l("it", Control, System, "ripristina impostazioni di fabbrica"),
    l("it", Control, System, "ripristino dati di fabbrica"), l("it", Control, System, "disinstalla"),
    l("it", Control, System, "formatta"), l("it", Control, System, "revoca accesso"),
    l("it", Control, System, "revoca"), l("it", Control, System, "annulla abbonamento"),
    l("it", Control, System, "spegni"),
    l("it", Confirm, Delete, "sì"), l("it", Confirm, Delete, "continua"),
    l("it", Confirm, Delete, "conferma"), l("it", Confirm, Delete, "accetta"),
    l("it", Confirm, Delete, "procedi"), l("it", Confirm, Overwrite, "sostituisci"),
    l("it", Context, Delete, "definitivamente"), l("it", Context, Delete, "permanentemente"),
    l("it", Context, Delete, "non può essere annullata"), l("it", Context, Delete, "irreversibile"),
    l("it", Context, Close, "andranno perse"), l("it", Context, Overwrite, "esiste già"),
    l("it", Trash, Delete, "cestino"),
    // ── Portuguese ──
    l("pt", Control, Delete, "excluir"), l("pt", Control, Delete, "apagar"),
    l("pt", Control, Delete, "excluir permanentemente"), l("pt", Control, Delete, "mover para a lixeira"),
    l("pt", Control, Delete, "esvaziar lixeira"), l("pt", Control, Delete, "remover"),
    l("pt", Control, Overwrite, "sobrescrever"),
    l("pt", Control, Close, "não salvar"), l("pt", Control, Close, "não guardar"),
    l("pt", Control, Close, "descartar alterações"), l("pt", Control, Close, "fechar sem salvar"),
    l("pt", Control, Send, "enviar"), l("pt", Control, Send, "publicar"),
    l("pt", Control, Pay, "pagar"), l("pt", Control, Pay, "comprar"),
    l("pt", Control, Pay, "finalizar compra"), l("pt", Control, Pay, "fazer pedido"),
    l("pt", Control, Pay, "confirmar pedido"), l("pt", Control, Pay, "confirmar pagamento"),
    l("pt", Control, Pay, "assinar"),
    l("pt", Control, System, "restaurar configurações de fábrica"),
    l("pt", Control, System, "redefinição de fábrica"), l("pt", Control, System, "desinstalar"),
    l("pt", Control, System, "formatar"), l("pt", Control, System, "revogar acesso"),
    l("pt", Control, System, "revogar"), l("pt", Control, System, "cancelar assinatura"),
    l("pt", Control, System, "desligar"),
    l("pt", Confirm, Delete, "sim"), l("pt", Confirm, Delete, "continuar"),
    l("pt", Confirm, Delete, "confirmar"), l("pt", Confirm, Delete, "aceitar"),
    l("pt", Confirm, Delete, "prosseguir"), l("pt", Confirm, Overwrite, "substituir"),
    l("pt", Context, Delete, "permanentemente"), l("pt", Context, Delete, "não pode ser desfeita"),
    l("pt", Context, Delete, "irreversível"), l("pt", Context, Close, "serão perdidas"),
    l("pt", Context, Overwrite, "já existe"),
    l("pt", Trash, Delete, "lixeira"), l("pt", Trash, Delete, "reciclagem"),
    // ── Russian ──
    l("ru", Control, Delete, "удалить"), l("ru", Control, Delete, "удалить навсегда"),
    l("ru", Control, Delete, "стереть"), l("ru", Control, Delete, "в корзину"),
    l("ru", Control, Delete, "очистить корзину"), l("ru", Control, Overwrite, "перезаписать"),
    l("ru", Control, Close, "не сохранять"), l("ru", Control, Close, "отменить изменения"),
    l("ru", Control, Close, "закрыть без сохранения"),
    l("ru", Control, Send, "отправить"), l("ru", Control, Send, "опубликовать"),
    l("ru", Control, Pay, "оплатить"), l("ru", Control, Pay, "купить"),
    l("ru", Control, Pay, "заказать"), l("ru", Control, Pay, "оформить заказ"),
    l("ru", Control, Pay, "перевести"), l("ru", Control, Pay, "подписаться"),
    l("ru", Control, System, "сброс к заводским настройкам"),
    l("ru", Control, System, "сбросить настройки"), l("ru", Control, System, "удалить программу"),
    l("ru", Control, System, "форматировать"), l("ru", Control, System, "отозвать доступ"),
    l("ru", Control, System, "отменить подписку"), l("ru", Control, System, "выключить"),
    l("ru", Confirm, Delete, "да"), l("ru", Confirm, Delete, "ок"),
    l("ru", Confirm, Delete, "продолжить"), l("ru", Confirm, Delete, "подтвердить"),
    l("ru", Confirm, Delete, "принять"), l("ru", Confirm, Overwrite, "заменить"),
    l("ru", Context, Delete, "навсегда"), l("ru", Context, Delete, "безвозвратно"),
    l("ru", Context, Delete, "необратимо"), l("ru", Context, Delete, "нельзя отменить"),
    l("ru", Context, Close, "будут потеряны"), l("ru", Context, Overwrite, "уже существует"),
    l("ru", Trash, Delete, "корзина"), l("ru", Trash, Delete, "корзину"),
    // ── Chinese (simplified and traditional) ──
    l("zh", Control, Delete, "删除"), l("zh", Control, Delete, "刪除"),
    l("zh", Control, Delete, "永久删除"), l("zh", Control, Delete, "移到回收站"),
    l("zh", Control, Delete, "清空回收站"), l("zh", Control, Delete, "移除"),
    l("zh", Control, Overwrite, "覆盖"), l("zh", Control, Overwrite, "覆蓋"),
    l("zh", Control, Close, "不保存"), l("zh", Control, Close, "不儲存"),
    l("zh", Control, Close, "放弃更改"), l("zh", Control, Close, "丢弃"),
    l("zh", Control, Send, "发送"), l("zh", Control, Send, "發送"),
    l("zh", Control, Send, "发布"), l("zh", Control, Send, "發佈"),
    l("zh", Control, Pay, "支付"), l("zh", Control, Pay, "付款"),
    l("zh", Control, Pay, "立即支付"), l("zh", Control, Pay, "购买"),
    l("zh", Control, Pay, "購買"), l("zh", Control, Pay, "立即购买"),
    l("zh", Control, Pay, "下单"), l("zh", Control, Pay, "提交订单"),
    l("zh", Control, Pay, "转账"), l("zh", Control, Pay, "轉帳"), l("zh", Control, Pay, "订阅"),
    l("zh", Control, System, "恢复出厂设置"), l("zh", Control, System, "恢復原廠設定"),
    l("zh", Control, System, "卸载"), l("zh", Control, System, "解除安裝"),
    l("zh", Control, System, "格式化"), l("zh", Control, System, "撤销访问"),
    l("zh", Control, System, "取消订阅"), l("zh", Control, System, "关机"),
    l("zh", Confirm, Delete, "确定"), l("zh", Confirm, Delete, "確定"),
    l("zh", Confirm, Delete, "是"), l("zh", Confirm, Delete, "继续"),
    l("zh", Confirm, Delete, "繼續"), l("zh", Confirm, Delete, "确认"),
    l("zh", Confirm, Delete, "確認"), l("zh", Confirm, Overwrite, "替换"),
    l("zh", Context, Delete, "永久"), l("zh", Context, Delete, "无法撤销"),
    l("zh", Context, Delete, "無法復原"), l("zh", Context, Delete, "不可恢复"),
    l("zh", Context, Close, "将丢失"), l("zh", Context, Overwrite, "已存在"),
    l("zh", Trash, Delete, "回收站"), l("zh", Trash, Delete, "資源回收筒"),
    // ── Japanese ──
    l("ja", Control, Delete, "削除"), l("ja", Control, Delete, "完全に削除"),
    l("ja", Control, Delete, "ゴミ箱に移動"), l("ja", Control, Delete, "ゴミ箱を空にする"),
    l("ja", Control, Delete, "消去"), l("ja", Control, Overwrite, "上書き"),
    l("ja", Control, Close, "保存しない"), l("ja", Control, Close, "破棄"),
    l("ja", Control, Close, "変更を破棄"),
    l("ja", Control, Send, "送信"), l("ja", Control, Send, "公開"), l("ja", Control, Send, "投稿"),
    l("ja", Control, Pay, "支払う"), l("ja", Control, Pay, "支払い"),
    l("ja", Control, Pay, "購入"), l("ja", Control, Pay, "今すぐ購入"),
    l("ja", Control, Pay, "注文を確定"), l("ja", Control, Pay, "注文する"),
    l("ja", Control, Pay, "振込"),
    l("ja", Control, System, "工場出荷時"), l("ja", Control, System, "初期化"),
    l("ja", Control, System, "アンインストール"), l("ja", Control, System, "フォーマット"),
    l("ja", Control, System, "アクセスを取り消す"), l("ja", Control, System, "解約"),
    l("ja", Control, System, "シャットダウン"),
    l("ja", Confirm, Delete, "はい"), l("ja", Confirm, Delete, "続行"),
    l("ja", Confirm, Delete, "確認"), l("ja", Confirm, Overwrite, "置き換え"),
    l("ja", Context, Delete, "完全に"), l("ja", Context, Delete, "元に戻せません"),
    l("ja", Context, Delete, "取り消せません"), l("ja", Context, Close, "失われます"),
    l("ja", Context, Overwrite, "既に存在します"), l("ja", Context, Overwrite, "すでに存在します"),
    l("ja", Trash, Delete, "ゴミ箱"), l("ja", Trash, Delete, "ごみ箱"),
    // ── Korean ──
    l("ko", Control, Delete, "삭제"), l("ko", Control, Delete, "영구 삭제"),
    l("ko", Control, Delete, "휴지통으로 이동"), l("ko", Control, Delete, "휴지통 비우기"),
    l("ko", Control, Delete, "지우기"), l("ko", Control, Overwrite, "덮어쓰기"),
    l("ko", Control, Close, "저장 안 함"), l("ko", Control, Close, "저장하지 않음"),
    l("ko", Control, Close, "변경 사항 취소"),
    l("ko", Control, Send, "보내기"), l("ko", Control, Send, "전송"), l("ko", Control, Send, "게시"),
    l("ko", Control, Pay, "결제"), l("ko", Control, Pay, "결제하기"),
    l("ko", Control, Pay, "구매"), l("ko", Control, Pay, "구매하기"),
    l("ko", Control, Pay, "주문하기"), l("ko", Control, Pay, "송금"),
    l("ko", Control, System, "공장 초기화"), l("ko", Control, System, "초기화"),
    l("ko", Control, System, "제거"), l("ko", Control, System, "포맷"),
    l("ko", Control, System, "액세스 취소"), l("ko", Control, System, "구독 취소"),
    l("ko", Control, System, "시스템 종료"),
    l("ko", Confirm, Delete, "예"), l("ko", Confirm, Delete, "네"),
    l("ko", Confirm, Delete, "확인"), l("ko", Confirm, Delete, "계속"),
    l("ko", Confirm, Overwrite, "바꾸기"),
    l("ko", Context, Delete, "영구적으로"), l("ko", Context, Delete, "되돌릴 수 없습니다"),
    l("ko", Context, Delete, "취소할 수 없습니다"), l("ko", Context, Close, "손실됩니다"),
    l("ko", Context, Overwrite, "이미 존재합니다"),
    l("ko", Trash, Delete, "휴지통"),
];

/// A table entry with its text normalized once.
struct Prepared {
    label: Label,
    /// The normalized words (Latin, Cyrillic), or the normalized text (CJK).
    words: Vec<String>,
    text: String,
    anywhere: bool,
}

fn prepared() -> &'static [Prepared] {
    static TABLE: OnceLock<Vec<Prepared>> = OnceLock::new();
    TABLE.get_or_init(|| {
        LABELS
            .iter()
            .map(|label| {
                let text = normalize(label.text);
                Prepared {
                    label: *label,
                    words: words(&text).into_iter().map(str::to_string).collect(),
                    anywhere: text.chars().any(is_cjk),
                    text,
                }
            })
            .collect()
    })
}

/// Whether a character belongs to a script written without spaces between words (Han,
/// kana) or one whose words take suffixes (Hangul): such labels match anywhere in the text.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF // hiragana, katakana
        | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF // Han
        | 0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF // Hangul
    )
}

/// The entries of `usage` found in `text`, longest first (so "delete permanently" wins over
/// "delete").
pub fn find(text: &str, usage: Use) -> Vec<Label> {
    let normalized = normalize(text);
    let text_words: Vec<&str> = words(&normalized);
    let mut found: Vec<(usize, Label)> = prepared()
        .iter()
        .filter(|p| p.label.usage == usage)
        .filter(|p| {
            if p.anywhere {
                normalized.contains(&p.text)
            } else {
                !p.words.is_empty()
                    && text_words
                        .windows(p.words.len())
                        .any(|w| w.iter().zip(&p.words).all(|(a, b)| *a == b))
            }
        })
        .map(|p| (p.text.chars().count(), p.label))
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, l)| l).collect()
}

/// The first entry of `usage` in `text`, longest first.
pub fn first(text: &str, usage: Use) -> Option<Label> {
    find(text, usage).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_has_every_use_and_labels_are_normalized_once() {
        for lang in LANGUAGES {
            for usage in [Control, Confirm, Context, Trash] {
                assert!(
                    LABELS.iter().any(|l| l.lang == lang && l.usage == usage),
                    "{lang} {usage:?}"
                );
            }
        }
        assert!(LABELS.iter().all(|l| LANGUAGES.contains(&l.lang)));
    }

    #[test]
    fn labels_match_whole_words_or_anywhere_in_cjk() {
        assert_eq!(first("Löschen", Control).map(|l| l.kind), Some(Delete));
        assert_eq!(
            first("Endgültig löschen", Control).map(|l| l.text),
            Some("endgültig löschen")
        );
        assert_eq!(first("Удалить", Control).map(|l| l.kind), Some(Delete));
        assert_eq!(first("文件删除", Control).map(|l| l.kind), Some(Delete));
        assert_eq!(
            first("Place your order", Control).map(|l| l.kind),
            Some(Pay)
        );
        assert_eq!(
            first("Cancel my subscription", Control).map(|l| l.kind),
            Some(System)
        );
        assert_eq!(first("Sender", Control), None);
        assert_eq!(first("Format", Control), None);
        assert_eq!(first("Deleted items", Control), None);
        assert_eq!(first("Dеlеtе", Control).map(|l| l.kind), Some(Delete));
    }
}
